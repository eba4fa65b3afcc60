#pragma once
/// Golden-section search for the minimum of a unimodal function of one variable, shared by the
/// calibrations that fit one constant (the ThetaGPU input rate, Megatron's GEMM efficiency).

#include <functional>

namespace foresight::validate {

/// The midpoint of the bracket [a, b] around f's minimum once it is narrower than `tolerance`
/// or after `max_steps` narrowings.
double golden_section_min(const std::function<double(double)>& f, double a, double b, double tolerance,
                          int max_steps);

}  // namespace foresight::validate
