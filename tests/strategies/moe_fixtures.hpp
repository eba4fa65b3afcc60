#pragma once
// Shared by the MoE tests (moe_test.cpp, expert_tp_test.cpp): a tiny Mixtral-like scenario, its
// run, and the folding check.
#include <catch2/catch.hpp>

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "run/simulation.hpp"
#include "tests/test_paths.hpp"

namespace foresight::test::moe {

using nlohmann::json;

/// A 4-layer Mixtral-like model (h 512, 8 experts of 1024, top-2, seq 256) on H100s.
inline json tiny(const json& plan, int gpus) {
  json p = {{"micro_batch", 2}, {"precision", "bf16"}, {"optimizer", "adam"}, {"network", "analytical"}, {"steps", 2}};
  p.update(plan);
  return {{"model", {{"hf_config", foresight::test::data_path("hf/tiny-mixtral/config.json")}}},
          {"cluster", {{"preset", "dgx-h100"}, {"gpus", gpus}}},
          {"plan", p},
          {"workload", {{"steps", 1}}}};
}

inline strategy::SimulationOutput run(const json& doc) {
  return strategy::simulate_scenario(strategy::parse_scenario(doc, "moe.json"), {});
}

/// Per expert: gate/up h -> 2f and down f -> h.
inline double expert_params(double h, double f) { return 3.0 * h * f; }

/// The tiny model under `plan` on `gpus` folded (`fold` true) gives the unfolded answer bit for
/// bit on both network models, with balanced routing (then `balanced` ranks simulated) and
/// skewed (`skewed` ranks: whole EP groups).
inline void require_exact_folding(json plan, int gpus, std::size_t balanced, std::size_t skewed) {
  for (const char* network : {"analytical", "flow"}) {
    for (const char* routing : {"balanced", "zipf"}) {
      json unfolded = tiny(plan, gpus);
      unfolded["plan"]["fold"] = false;
      unfolded["plan"]["network"] = network;
      unfolded["plan"]["moe_routing"] = {{"distribution", routing}};
      json folded = unfolded;
      folded["plan"]["fold"] = true;
      const auto a = run(unfolded);
      const auto b = run(folded);
      INFO(network << " " << routing);
      REQUIRE(a.compiled.graph.ranks() == static_cast<std::size_t>(gpus));
      REQUIRE(b.compiled.graph.ranks() == (std::string(routing) == "balanced" ? balanced : skewed));
      REQUIRE(b.report.iteration_time_s == a.report.iteration_time_s);
    }
  }
}


}  // namespace foresight::test::moe
