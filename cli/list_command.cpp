// foresight --list: every registry, with descriptions, units and defaults.
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "sim/collective_config.hpp"
#include "sim/collective_types.hpp"
#include "sim/registry.hpp"
#include "strategies/model_zoo.hpp"
#include "strategies/plan.hpp"
#include "topologies/cluster_builders.hpp"
#include "topologies/gpu_spec.hpp"

namespace foresight::cli {
namespace {

std::string section(std::string_view title, std::span<const sim::RegistryEntry> entries) {
  std::string out = fmt::format("{}\n", title);
  for (const auto& e : entries) out += fmt::format("  {:<14} {}\n", e.name, e.description);
  return out + "\n";
}

}  // namespace

std::string list_text() {
  std::string out;
  out += section("Network models (--network):", sim::network_models());
  out += section("Collective timing (--timing):", sim::collective_timings());
  out += section("Collective algorithms (--algorithm):", sim::collective_algorithms());
  out += section("NCCL protocols (--protocol):", sim::collective_protocols());
  out += "Collective operations (--op):\n ";
  for (int i = 0; i < sim::kCollectiveOpCount; ++i) out += fmt::format(" {}", sim::to_string(static_cast<sim::CollectiveOp>(i)));
  out += "\n\nCluster presets (--cluster):\n";
  for (const auto& [name, description] : topo::known_cluster_presets()) out += fmt::format("  {:<14} {}\n", name, description);
  out += "\nGPU models (topology files):\n";
  for (const auto& spec : topo::gpu_catalog()) {
    out += fmt::format("  {:<16} sm{}, {} SMs, {:.0f} GiB at {:.0f} GB/s, BF16 {:.1f} TFLOP/s dense\n", spec.name,
                       spec.compute_capability, spec.sm_count, spec.memory.as_double() / (1 << 30),
                       spec.memory_bandwidth.gigabytes_per_second(), spec.bf16.per_second() * 1e-12);
  }
  out += "\nModels (scenario model.name; any decoder-only transformer also from model.hf_config):\n";
  for (const auto& m : strategy::known_models()) out += fmt::format("  {:<16} {}\n", m.name, m.description);
  out += "\nPlan choices (scenario plan.*):\n";
  out += "  precision      fp32 (TF32 convolutions on Ampere+ unless tf32_conv is false), amp_fp16, amp_bf16\n"
         "                 (torch.autocast: fp32 master weights), fp16, bf16 (pure half precision)\n";
  out += fmt::format("  framework      {} (gradient buckets), {} (tensor fusion with a cycle time)\n",
                     strategy::to_string(strategy::Framework::ddp), strategy::to_string(strategy::Framework::horovod));
  out += fmt::format("  optimizer      {} (momentum: 1 state), {} (2 states)\n", strategy::to_string(strategy::Optimizer::sgd),
                     strategy::to_string(strategy::Optimizer::adam));
  out += "\nLink classes and their default efficiency (fraction of line rate transfers achieve):\n";
  const auto eff = sim::LinkEfficiency::defaults();
  for (int i = 0; i < sim::kLinkClassCount; ++i) {
    const auto c = static_cast<sim::LinkClass>(i);
    out += fmt::format("  {:<18} {:.3f}\n", sim::to_string(c), eff.of(c));
  }
  return out;
}

}  // namespace foresight::cli
