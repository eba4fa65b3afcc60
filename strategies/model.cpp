#include "strategies/model.hpp"

namespace foresight::strategy {

std::int64_t Model::params() const {
  std::int64_t n = 0;
  for (const Layer& l : layers) n += l.params;
  return n;
}

double Model::fwd_flops() const {
  double f = 0.0;
  for (const Layer& l : layers) f += l.fwd_flops;
  return f;
}

double Model::bwd_flops() const {
  double f = 0.0;
  for (const Layer& l : layers) f += l.bwd_flops;
  return f;
}

}  // namespace foresight::strategy
