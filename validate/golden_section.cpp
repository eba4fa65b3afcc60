#include "validate/golden_section.hpp"

#include <cmath>

namespace foresight::validate {

double golden_section_min(const std::function<double(double)>& f, double a, double b, double tolerance,
                          int max_steps) {
  const double phi = (std::sqrt(5.0) - 1.0) / 2.0;
  double c1 = b - phi * (b - a), c2 = a + phi * (b - a);
  double f1 = f(c1), f2 = f(c2);
  for (int step = 0; step < max_steps && b - a > tolerance; ++step) {
    if (f1 < f2) {
      b = c2;
      c2 = c1;
      f2 = f1;
      c1 = b - phi * (b - a);
      f1 = f(c1);
    } else {
      a = c1;
      c1 = c2;
      f1 = f2;
      c2 = a + phi * (b - a);
      f2 = f(c2);
    }
  }
  return 0.5 * (a + b);
}

}  // namespace foresight::validate
