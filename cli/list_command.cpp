// foresight --list: every registry, with descriptions, units and defaults; foresight params: every
// scenario key, from run/params.hpp's table.
#include <fmt/core.h>

#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "common/error.hpp"
#include "collectives/collective_config.hpp"
#include "collectives/collective_types.hpp"
#include "collectives/registry.hpp"
#include "models/model_zoo.hpp"
#include "run/params.hpp"
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
    // Tensor-core peaks, dense, the modes the GPU has (a V100 has neither BF16 nor FP8).
    std::string peaks = spec.bf16.per_second() > 0.0
                            ? fmt::format("BF16 {:.1f}", spec.bf16.per_second() * 1e-12)
                            : fmt::format("FP16 {:.1f} (no BF16)", spec.fp16.per_second() * 1e-12);
    if (spec.fp8.per_second() > 0.0) peaks += fmt::format(", FP8 {:.1f}", spec.fp8.per_second() * 1e-12);
    out += fmt::format("  {:<16} sm{}, {} SMs, {:.0f} GiB at {:.0f} GB/s, {} TFLOP/s dense\n", spec.name,
                       spec.compute_capability, spec.sm_count, spec.memory.as_double() / (1 << 30),
                       spec.memory_bandwidth.gigabytes_per_second(), peaks);
  }
  out += "\nModels (scenario model.name; any decoder-only transformer also from model.hf_config):\n";
  for (const auto& m : strategy::known_models()) out += fmt::format("  {:<16} {}\n", m.name, m.description);
  out += "\nScenario keys (model, cluster, plan, workload) with types, units, defaults and ranges: "
         "`foresight params`.\n";
  out += "\nLink classes and their default efficiency (fraction of line rate transfers achieve):\n";
  const auto eff = sim::LinkEfficiency::defaults();
  for (int i = 0; i < sim::kLinkClassCount; ++i) {
    const auto c = static_cast<sim::LinkClass>(i);
    out += fmt::format("  {:<18} {:.3f}\n", sim::to_string(c), eff.of(c));
  }
  return out;
}

void add_params_command(CLI::App& app, Runner& run) {
  struct Options {
    bool markdown = false;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "params", "List every scenario key (model, cluster, plan, workload): type, unit, default, range and meaning");
  cmd->add_flag("--markdown", o->markdown, "Print docs/reference.md (the reference generated from the same table)");
  cmd->add_flag("--json", o->json, "Print the table as JSON");
  cmd->callback([&run, o] {
    run = [o] {
      if (o->markdown && o->json) throw sim::ConfigError("params: expected at most one of --markdown and --json");
      const std::string text = o->markdown ? strategy::params_markdown()
                               : o->json   ? strategy::params_json().dump(1) + "\n"
                                           : strategy::params_text();
      std::fputs(text.c_str(), stdout);
      return 0;
    };
  });
}

}  // namespace foresight::cli
