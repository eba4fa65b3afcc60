#pragma once
/// The scenario's model, and the model as a plan runs it: the plan's kernel transforms (fused
/// attention, FP8, Megatron-LM v2's softmax, fused BatchNorm, eager kernels) applied in turn,
/// and checked against the plan.

#include "models/model.hpp"
#include "run/scenario.hpp"

namespace foresight::strategy {

/// Builds the scenario's model (zoo name or Hugging Face config).
Model scenario_model(const Scenario& s);

/// The model of `scenario` as `plan` runs it; ConfigError naming the scenario and the plan field
/// where the plan does not fit the model (fused attention, FP8 or eager kernels without
/// attention, BatchNorm fusion without a BatchNorm, experts it does not divide, a graph past its
/// bound, a routing that does not fit).
Model plan_model(const Scenario& scenario, const Plan& plan);

}  // namespace foresight::strategy
