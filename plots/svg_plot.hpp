#pragma once
/// Small, dependency-free SVG charts for sweeps and validation ("predicted vs measured"): line or
/// scatter series on linear or logarithmic axes, with ticks, labels, a legend and dashed
/// reference lines y = factor * x. The output is deterministic (fixed number formatting).

#include <string>
#include <utility>
#include <vector>

namespace foresight::validate {

/// One data series: (x, y) points in the axes' units, drawn in the given order.
struct Series {
  std::string label;  ///< shown in the legend
  std::vector<std::pair<double, double>> points;
  bool markers_only = false;  ///< true: markers without a connecting line (a scatter)
};

struct Axis {
  std::string label;  ///< including the unit, e.g. "iteration time (s)"
  bool log = false;   ///< base-10 logarithmic: every value must be positive
  /// Explicit major ticks (labelled with up to 6 significant digits), e.g. the GPU counts of a
  /// sweep. When given, the axis spans the ticks and the data with 4 % padding on either side and
  /// has no minor ticks; empty: round ticks (linear) or decades (log) as below.
  std::vector<double> ticks;
};

/// A reference line y = factor * x drawn dashed across the data's x range (for "predicted vs
/// measured" plots: 1.0, 1.1, 0.9). An empty label reads "y = <factor> x".
struct ReferenceLine {
  double factor = 1.0;
  std::string label;
};

struct Chart {
  std::string title;
  Axis x;
  Axis y;
  std::vector<Series> series;
  std::vector<ReferenceLine> references;
};

/// One SVG document titled `title` with `charts` side by side, each 520 px wide and about 400 px
/// high (plus 18 px per legend entry, the legend sitting under the plot); with `columns` > 0, in
/// rows of that many charts, each row as tall as its tallest chart. Linear axes get round
/// ticks (1, 2 or 5 times a power of ten) and span whole ticks; log axes span whole decades,
/// labelled 1, 10, 100, ... with minor ticks at 2..9. Series colours come from a fixed
/// colour-blind-safe palette (then marker shapes tell series apart). Text is XML-escaped.
/// ConfigError naming the chart and series when there is no chart, a chart has no series, a
/// series has no points, a value is not finite, or a value on a log axis is not positive (or a
/// reference factor is not positive when y is logarithmic).
std::string svg_charts(const std::string& title, const std::vector<Chart>& charts, std::size_t columns = 0);

}  // namespace foresight::validate
