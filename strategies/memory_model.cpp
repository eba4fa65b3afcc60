#include "strategies/memory_model.hpp"

#include <algorithm>
#include <cmath>

namespace foresight::strategy {

namespace {

/// Weights, gradients and optimizer states of `params` parameters, and the data-parallel buffers.
MemoryBreakdown model_states(double params, const Plan& plan) {
  MemoryBreakdown m;
  m.weights = params * parameter_bytes(plan.precision);
  // torch.autocast caches the half-precision copy of each weight it casts during the forward pass.
  if (plan.precision == Precision::amp_fp16 || plan.precision == Precision::amp_bf16) m.weights += params * 2.0;
  m.gradients = params * gradient_bytes(plan.precision);
  // SGD with momentum: one fp32 buffer; Adam: two. Pure half precision keeps fp32 master weights.
  m.optimizer = params * (plan.optimizer == Optimizer::sgd ? 4.0 : 8.0);
  if (plan.precision == Precision::fp16 || plan.precision == Precision::bf16) m.optimizer += params * 4.0;
  if (plan.dp > 1) {
    m.buffers = plan.framework == Framework::ddp ? m.gradients
                                                 : std::min(plan.fusion_threshold.as_double(), m.gradients);
  }
  m.workspace = kWorkspaceBytes;
  return m;
}

}  // namespace

MemoryBreakdown data_parallel_memory(const Model& model, const Plan& plan) {
  MemoryBreakdown m = model_states(static_cast<double>(model.params()), plan);
  double saved = 0.0;
  double masks = 0.0;
  double largest_output = 0.0;
  for (const Layer& l : model.layers) {
    saved += l.saved_elems;
    masks += l.saved_mask_elems;
    largest_output = std::max(largest_output, l.output_elems);
  }
  // Saved activations and 1-byte dropout masks, plus the largest transient output and its
  // gradient (the tensors in flight at the turn from forward to backward).
  m.activations = ((saved + 2.0 * largest_output) * activation_bytes(plan.precision) + masks) * plan.micro_batch;
  m.allocator = std::ceil(kAllocatorFraction * (m.activations + m.buffers));  // whole bytes
  return m;
}

MemoryBreakdown pipeline_rank_memory(double params, const Plan& plan, double activation_peak, int in_flight) {
  MemoryBreakdown m = model_states(params, plan);
  if (plan.schedule == Schedule::pipedream) {
    // Weight stashing: one more version of the stage's weights per extra micro-batch in flight
    // (Narayanan et al. 2019, PipeDream section 3.3).
    m.weights += std::max(0, in_flight - 1) * params * parameter_bytes(plan.precision);
  }
  m.activations = activation_peak;
  m.allocator = std::ceil(kAllocatorFraction * (m.activations + m.buffers));
  return m;
}

}  // namespace foresight::strategy
