// The Perfetto timeline of a 4-stage 1F1B run reads as the schedule diagram: each stage's compute
// slices, labelled F<m>/B<m>, run in 1F1B order, and a micro-batch's forward reaches a stage only
// after the previous stage finished it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strategies/pipeline.hpp"
#include "tests/strategies/toy_model.hpp"
#include "topologies/cluster_builders.hpp"
#include "traces/chrome_trace.hpp"

using namespace foresight;
using nlohmann::json;

namespace {

struct Slice {
  double start = 0;
  double end = 0;
  std::string label;  // "F3", "B0"
};

/// The 1F1B diagram of stage s of p with m micro-batches, from the rule (Narayanan et al.
/// 2021, PipeDream-flush): min(p-s-1, m) warm-up forwards, then one forward and one backward in
/// turn, then the remaining backwards.
std::vector<std::string> one_f_one_b(int p, int s, int m) {
  const int warm = std::min(p - s - 1, m);
  std::vector<std::string> order;
  for (int i = 0; i < warm; ++i) order.push_back("F" + std::to_string(i));
  for (int i = 0; i < m - warm; ++i) {
    order.push_back("F" + std::to_string(warm + i));
    order.push_back("B" + std::to_string(i));
  }
  for (int i = m - warm; i < m; ++i) order.push_back("B" + std::to_string(i));
  return order;
}

}  // namespace

TEST_CASE("a 4-stage 1F1B timeline shows the schedule diagram, slices labelled by micro-batch", "[training]") {
  const int p = 4;
  const int m = 8;
  auto model = test::toy_mlp(8, 8192);
  model.input_elems = 1;
  auto plan = test::pipeline_plan(p, 256, m);
  plan.precision = strategy::Precision::amp_fp16;
  plan.partition = strategy::PartitionMode::explicit_units;
  plan.partition_units = {2, 2, 2, 3};
  const strategy::ComputeModel compute(test::dgx().gpu_model(0));
  const auto compiled = strategy::compile_pipeline(model, plan, test::dgx(), compute);
  const auto result = sim::execute(compiled.graph, test::dgx(), sim::CollectiveConfig{}, sim::NetworkKind::flow);
  const json trace = json::parse(trace::chrome_trace_json(compiled.graph, result, {}, {"1f1b", {}}));

  // Per stage (pid = rank + 1), the compute slices of each micro-batch's forward or backward,
  // merged into one span per label.
  std::map<int, std::map<std::string, Slice>> spans;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["args"]["kind"] != "compute") continue;
    const std::string name = e["name"];
    if (name.size() < 2 || (name[0] != 'F' && name[0] != 'B') || name.find(' ') == std::string::npos) continue;
    const std::string label = name.substr(0, name.find(' '));
    REQUIRE(e["args"]["micro_batch"].get<int>() == std::stoi(label.substr(1)));
    const double ts = e["ts"];
    const double end = ts + e["dur"].get<double>();
    Slice& s = spans[e["pid"].get<int>() - 1][label];
    if (s.label.empty()) s = {ts, end, label};
    s.start = std::min(s.start, ts);
    s.end = std::max(s.end, end);
  }
  REQUIRE(spans.size() == static_cast<std::size_t>(p));
  for (int s = 0; s < p; ++s) {
    INFO("stage " << s);
    std::vector<Slice> slices;
    for (const auto& [label, slice] : spans[s]) slices.push_back(slice);
    REQUIRE(slices.size() == static_cast<std::size_t>(2 * m));
    std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) { return a.start < b.start; });
    std::vector<std::string> order;
    for (std::size_t k = 0; k < slices.size(); ++k) {
      order.push_back(slices[k].label);
      // Spans do not interleave: a stage runs one micro-batch's pass at a time.
      if (k > 0) REQUIRE(slices[k].start >= slices[k - 1].end - 1e-6);
    }
    REQUIRE(order == one_f_one_b(p, s, m));
    if (s > 0) {
      for (int i = 0; i < m; ++i) {
        const std::string f = "F" + std::to_string(i);
        const std::string b = "B" + std::to_string(i);
        REQUIRE(spans[s][f].start >= spans[s - 1][f].end);   // activations flow down
        REQUIRE(spans[s - 1][b].start >= spans[s][b].end);   // gradients flow up
      }
    }
  }
}
