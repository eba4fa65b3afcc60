#include "strategies/plan.hpp"

#include <fmt/core.h>

#include <cmath>

#include "common/splitmix.hpp"

namespace foresight::strategy {

std::string_view to_string(Precision p) {
  switch (p) {
    case Precision::fp32:
      return "fp32";
    case Precision::amp_fp16:
      return "amp_fp16";
    case Precision::amp_bf16:
      return "amp_bf16";
    case Precision::fp16:
      return "fp16";
    case Precision::bf16:
      return "bf16";
  }
  return "?";
}

std::string_view to_string(Framework f) { return f == Framework::ddp ? "ddp" : "horovod"; }
std::string_view to_string(Optimizer o) { return o == Optimizer::sgd ? "sgd" : "adam"; }
std::string_view to_string(OptimizerImpl o) { return o == OptimizerImpl::foreach ? "foreach" : "fused"; }

std::string_view to_string(Schedule s) {
  switch (s) {
    case Schedule::none:
      return "none";
    case Schedule::naive:
      return "naive";
    case Schedule::gpipe:
      return "gpipe";
    case Schedule::one_f_one_b:
      return "1f1b";
    case Schedule::interleaved:
      return "interleaved";
    case Schedule::pipedream:
      return "pipedream";
  }
  return "?";
}

std::string_view to_string(PartitionMode m) {
  switch (m) {
    case PartitionMode::time:
      return "time";
    case PartitionMode::params:
      return "params";
    case PartitionMode::uniform:
      return "uniform";
    case PartitionMode::explicit_units:
      return "explicit";
  }
  return "?";
}

std::string_view to_string(PipelineDriver d) { return d == PipelineDriver::per_stage ? "per_stage" : "single_process"; }

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::none:
      return "none";
    case Recompute::full:
      return "full";
    case Recompute::except_last:
      return "except_last";
    case Recompute::selective:
      return "selective";
    case Recompute::selective_op:
      return "selective_op";
  }
  return "?";
}

std::string ranks_formula(const Plan& plan) {
  return fmt::format("dp x {} x pp x ep x cp = {} x {} x {} x {} x {}", plan.etp() == plan.tp ? "tp" : "expert_tp",
                     plan.dp, plan.etp(), plan.pp, plan.ep, plan.cp);
}

std::string_view ep_factor(const Plan& plan) {
  if (plan.ep <= 1) return "";
  return plan.etp() == plan.tp ? " x ep" : " x ep x expert_tp / tp";
}

int activation_bytes(Precision p) { return p == Precision::fp32 ? 4 : 2; }

// autocast keeps fp32 weights and fp32 gradients (torch.amp docs); pure half precision stores both in 2 bytes.
int parameter_bytes(Precision p) { return (p == Precision::fp16 || p == Precision::bf16) ? 2 : 4; }
int gradient_bytes(Precision p) { return parameter_bytes(p); }

int gradient_bytes_per_param(const Plan& plan) { return plan.fp32_main_grads ? 4 : gradient_bytes(plan.precision); }

double straggler_factor(const Plan& plan, int gpu, int step) {
  double factor = 1.0;
  for (const int g : plan.straggler_gpus) {
    if (g == gpu) factor = plan.straggler_slowdown;
  }
  if (plan.straggler_jitter > 0.0) {
    const std::uint64_t h = splitmix64(splitmix64(splitmix64(plan.straggler_seed) ^ static_cast<std::uint64_t>(gpu)) ^
                                       static_cast<std::uint64_t>(step));
    const double u = unit_interval(h);
    factor *= 1.0 - plan.straggler_jitter * std::log1p(-u);
  }
  return factor;
}

}  // namespace foresight::strategy
