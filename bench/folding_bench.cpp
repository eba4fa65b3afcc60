// Rank folding and memoized collectives: GPT-3 Small with tp 4 x pp 2 x dp 8 on 64 A100s of
// selene, simulated unfolded and folded, on the flow and analytical networks. Prints wall time,
// graph nodes, events and events/s of each run, the speed-up of folding, and checks that the
// iteration times agree.
// Usage: folding_bench
#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "run/simulation.hpp"

using namespace foresight;

int main() {
  const nlohmann::json base = {
      {"model", {{"name", "gpt3-125m"}}},
      {"cluster", {{"preset", "selene"}, {"gpus", 64}}},
      {"plan",
       {{"dp", 8}, {"tp", 4}, {"pp", 2}, {"micro_batch", 4}, {"global_batch", 256}, {"precision", "bf16"},
        {"optimizer", "adam"}, {"sequence_parallel", true}, {"schedule", "1f1b"}, {"partition", "uniform"},
        {"steps", 2}}},
      {"workload", {{"steps", 1}}}};
  for (const char* network : {"flow", "analytical"}) {
    double seconds[2] = {0.0, 0.0};
    double iteration[2] = {0.0, 0.0};
    for (const bool fold : {false, true}) {
      nlohmann::json doc = base;
      doc["plan"]["network"] = network;
      doc["plan"]["fold"] = fold;
      const auto t0 = std::chrono::steady_clock::now();
      const auto out = strategy::simulate_scenario(strategy::parse_scenario(doc, "bench.json"), {});
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      seconds[fold] = s;
      iteration[fold] = out.report.iteration_time_s;
      fmt::print("{:<10} {:<8} {:>3} ranks, {:>9} nodes, {:>10} events in {:6.2f} s ({:.2f} M events/s), "
                 "iteration {:.6f} s\n",
                 network, fold ? "folded" : "unfolded", out.compiled.graph.ranks(), out.compiled.graph.nodes.size(),
                 out.result.events, s, static_cast<double>(out.result.events) / s * 1e-6, out.report.iteration_time_s);
    }
    fmt::print("{:<10} folding is {:.1f}x faster; iterations {}\n", network, seconds[0] / seconds[1],
               iteration[0] == iteration[1] ? "identical" : "DIFFER");
  }
  return 0;
}
