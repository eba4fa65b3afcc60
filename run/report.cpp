#include "run/report.hpp"

#include <fmt/core.h>

#include <cmath>

#include <algorithm>
#include <array>
#include <span>
#include <utility>
#include <nlohmann/json.hpp>

#include "common/large_vector.hpp"

namespace foresight::strategy {
namespace {

using Interval = std::pair<std::int64_t, std::int64_t>;

/// Total length (picoseconds) of the union of intervals `v`, which are sorted.
std::int64_t union_length(std::span<const Interval> v) {
  std::int64_t total = 0;
  std::int64_t cur_start = 0;
  std::int64_t cur_end = -1;
  bool open = false;
  for (const auto& [a, b] : v) {
    if (!open || a > cur_end) {
      if (open) total += cur_end - cur_start;
      cur_start = a;
      cur_end = b;
      open = true;
    } else {
      cur_end = std::max(cur_end, b);
    }
  }
  if (open) total += cur_end - cur_start;
  return total;
}

std::string bytes_text(double b) { return sim::to_string(sim::Bytes(static_cast<std::int64_t>(b))); }

std::string seconds_text(double s) { return s == 0.0 ? "0" : sim::to_string(sim::Time::from_seconds(s)); }

/// FLOPs with an SI prefix and 3 significant digits: "1.11 GFLOP", "735 TFLOP".
std::string flop_text(double flops) {
  constexpr std::array<std::pair<double, const char*>, 4> kUnits{
      {{1e15, "PFLOP"}, {1e12, "TFLOP"}, {1e9, "GFLOP"}, {1e6, "MFLOP"}}};
  for (const auto& [scale, unit] : kUnits) {
    if (flops >= scale) return fmt::format("{:.3g} {}", flops / scale, unit);
  }
  return fmt::format("{:.3g} FLOP", flops);
}

/// A long run also in hours or days: "5.945e+06 s (68.8 days)".
std::string run_text(double s) {
  if (s >= 2 * 86400.0) return fmt::format("{} ({:.1f} days)", seconds_text(s), s / 86400.0);
  if (s >= 3600.0) return fmt::format("{} ({:.1f} hours)", seconds_text(s), s / 3600.0);
  return seconds_text(s);
}

/// The slowest rank's iteration in plain words, largest share first: "85% waiting for the host
/// (data loading, kernel launches), 15% computing, ...".
std::string where_time_goes(const RankBreakdown& b) {
  if (!(b.iteration_s > 0.0)) return "-";
  std::vector<std::pair<double, std::string_view>> parts{
      {b.compute_s, "computing"},
      {b.exposed_comm_s, "communicating with nothing to overlap it"},
      {b.bubble_s, "in the pipeline bubble (stages waiting for each other)"},
      {b.host_s, "waiting for the host (data loading, kernel launches, the optimizer on the CPU)"}};
  std::stable_sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::string out;
  for (const auto& [s, what] : parts) {
    const double pct = 100.0 * s / b.iteration_s;
    if (pct < 0.5 && !out.empty()) continue;
    out += fmt::format("{}{:.0f}% {}", out.empty() ? "" : ", ", pct, what);
  }
  return out;
}

/// 4 significant digits below 10,000; whole units with thousands separators above ("64,950").
std::string amount(double v) {
  if (!(v >= 1e4) || !std::isfinite(v)) return fmt::format("{:.4g}", v);
  return grouped_whole(v);
}

/// Whether `node`'s wait for its peer idles the GPU: a receive's (the data it computes on has
/// not come), or a send's on stream 1, which computes by convention (a blocking send, as
/// DeepSpeed's pipeline engine issues them: no kernel runs until the receiver is ready).
bool waits_for_peer(const sim::Node& node) {
  return node.kind == sim::OpKind::recv || (node.kind == sim::OpKind::send && node.stream == 1);
}

}  // namespace

std::vector<RankBreakdown> breakdown(const sim::ExecutionGraph& g, const sim::ExecutionResult& result,
                                     const std::vector<RankWindow>& windows) {
  // Each rank's compute, communication and wait intervals (a pipeline receive posted, its data
  // not yet sent; a blocking send not yet received), clipped to its window: all in one array,
  // each list's room counted first, so that no list is copied as it grows and the array is
  // whole huge pages.
  enum { kCompute, kComm, kWaits, kKinds };
  using Lists = std::array<std::size_t, kKinds>;
  const std::size_t ranks = windows.size();
  std::vector<Lists> first(ranks, Lists{});
  for (sim::NodeId n = 0; n < g.nodes.size(); ++n) {
    const sim::Node& node = g.nodes[n];
    if (node.rank >= ranks) continue;
    if (node.kind == sim::OpKind::compute) ++first[node.rank][kCompute];
    if (node.kind == sim::OpKind::collective || node.kind == sim::OpKind::send || node.kind == sim::OpKind::recv) {
      ++first[node.rank][kComm];
    }
    if (waits_for_peer(node)) ++first[node.rank][kWaits];
  }
  std::size_t total = 0;
  for (Lists& r : first) {
    for (std::size_t& k : r) total += std::exchange(k, total);
  }
  std::vector<Lists> last = first;  // one past each list's last interval
  sim::LargeVector<Interval> all(total);
  for (sim::NodeId n = 0; n < g.nodes.size(); ++n) {
    const sim::Node& node = g.nodes[n];
    if (node.rank >= ranks) continue;
    Lists& at = last[node.rank];
    const std::int64_t lo = windows[node.rank].from.ps();
    const std::int64_t hi = windows[node.rank].to.ps();
    if (waits_for_peer(node)) {
      const sim::Time ready = node.kind == sim::OpKind::recv ? result.ready_at(n) : result.send_ready_at(n);
      const std::int64_t a = std::max(lo, ready.ps());
      const std::int64_t b = std::min(hi, result.start[n].ps());
      if (b > a) all[at[kWaits]++] = {a, b};
    }
    const std::int64_t a = std::max(lo, result.start[n].ps());
    const std::int64_t b = std::min(hi, result.end[n].ps());
    if (b <= a) continue;
    if (node.kind == sim::OpKind::compute) all[at[kCompute]++] = {a, b};
    if (node.kind == sim::OpKind::collective || node.kind == sim::OpKind::send || node.kind == sim::OpKind::recv) {
      all[at[kComm]++] = {a, b};
    }
  }
  std::vector<RankBreakdown> out;
  sim::LargeVector<Interval> busy;
  sim::LargeVector<Interval> busy_or_waiting;
  for (std::size_t rank = 0; rank < ranks; ++rank) {
    const auto list = [&](int k) {
      return std::span<Interval>(all.data() + first[rank][static_cast<std::size_t>(k)],
                                 last[rank][static_cast<std::size_t>(k)] - first[rank][static_cast<std::size_t>(k)]);
    };
    const std::span<Interval> compute = list(kCompute);
    const std::span<Interval> comm = list(kComm);
    const std::span<Interval> waits = list(kWaits);
    for (const std::span<Interval> v : {compute, comm, waits}) std::sort(v.begin(), v.end());
    busy.resize(compute.size() + comm.size());
    std::merge(compute.begin(), compute.end(), comm.begin(), comm.end(), busy.begin());
    const double k = std::max(1, windows[rank].iterations);
    RankBreakdown& r = out.emplace_back();
    r.iteration_s = (windows[rank].to - windows[rank].from).seconds() / k;
    r.compute_s = static_cast<double>(union_length(compute)) * 1e-12 / k;
    r.comm_s = static_cast<double>(union_length(comm)) * 1e-12 / k;
    const double busy_s = static_cast<double>(union_length(busy)) * 1e-12 / k;
    r.exposed_comm_s = busy_s - r.compute_s;
    // Bubble: the GPU idle while the rank waits for another stage's activations or gradients.
    // The rest of the idle time waits on the host (dispatch, input, bookkeeping).
    busy_or_waiting.resize(busy.size() + waits.size());
    std::merge(busy.begin(), busy.end(), waits.begin(), waits.end(), busy_or_waiting.begin());
    r.bubble_s = std::max(0.0, static_cast<double>(union_length(busy_or_waiting)) * 1e-12 / k - busy_s);
    r.host_s = std::max(0.0, r.iteration_s - busy_s - r.bubble_s);
  }
  return out;
}

RankBreakdown breakdown(const sim::ExecutionGraph& g, const sim::ExecutionResult& result, sim::RankId rank,
                        sim::Time from, sim::Time to, int iterations) {
  std::vector<RankWindow> windows(static_cast<std::size_t>(rank) + 1);  // the others empty
  windows.back() = RankWindow{from, to, iterations};
  return breakdown(g, result, windows).back();
}

double Report::peak_bytes_max() const {
  double m = 0.0;
  for (const RankMemory& r : memory) m = std::max(m, r.bytes.total());
  return m;
}

bool Report::oom() const {
  return std::any_of(memory.begin(), memory.end(), [](const RankMemory& r) { return r.oom; });
}

namespace {

/// null when no price table was given.
nlohmann::json cost_json(const Costs& c) {
  if (!c.priced && !c.powered && c.note.empty()) return nullptr;
  nlohmann::json j{{"gpu_hours_run", c.gpu_hours_run}};
  if (c.priced) {
    j["usd_per_iteration"] = c.usd_per_iteration;
    j["usd_run"] = c.usd_run;
  }
  if (c.powered) {
    j["kwh_per_iteration"] = c.kwh_per_iteration;
    j["kwh_run"] = c.kwh_run;
  }
  if (!c.note.empty()) j["note"] = c.note;
  return j;
}

nlohmann::json pipeline_json(const Report& r) {
  using nlohmann::json;
  if (r.stages.empty()) return nullptr;
  json stages = json::array();
  for (const StageReport& st : r.stages) {
    json chunks = json::array();
    for (const auto& c : st.chunks) {
      chunks.push_back(json{{"first_layer", c.first_layer},
                            {"last_layer", c.last_layer},
                            {"units", c.units},
                            {"modelled_s", c.modelled_s},
                            {"params", c.params}});
    }
    const auto ri = static_cast<std::size_t>(st.rank);
    stages.push_back(json{{"stage", st.stage},
                          {"chunks", chunks},
                          {"in_flight", st.in_flight},
                          {"bubble_s", ri < r.per_rank.size() ? r.per_rank[ri].bubble_s : 0.0},
                          {"compute_s", ri < r.per_rank.size() ? r.per_rank[ri].compute_s : 0.0},
                          {"peak_bytes", ri < r.memory.size() ? r.memory[ri].bytes.total() : 0.0}});
  }
  return json{{"schedule", r.schedule}, {"stages", stages}};
}

nlohmann::json moe_json(const Report& r) {
  using nlohmann::json;
  if (r.expert_loads.empty()) return nullptr;
  json ranks = json::array();
  for (const ExpertLoad& l : r.expert_loads) {
    ranks.push_back(json{{"rank", l.rank}, {"gpu", l.gpu}, {"stage", l.stage}, {"ep_rank", l.ep_rank},
                         {"tokens", l.tokens}, {"expert_s", l.expert_s}});
  }
  return json{{"routing", r.moe_routing},
              {"per_rank", ranks},
              {"imbalance_s", r.moe_imbalance_s},
              {"dropped_tokens", r.moe_dropped_tokens}};
}

}  // namespace

nlohmann::json to_json(const Report& r, const nlohmann::json& plan) {
  using nlohmann::json;
  auto rank_json = [](const RankBreakdown& b) {
    return json{{"iteration_s", b.iteration_s}, {"compute_s", b.compute_s},   {"comm_s", b.comm_s},
                {"exposed_comm_s", b.exposed_comm_s}, {"bubble_s", b.bubble_s}, {"host_s", b.host_s}};
  };
  json per_rank_time = json::array();
  for (std::size_t i = 0; i < r.per_rank.size(); ++i) {
    json j = rank_json(r.per_rank[i]);
    j["rank"] = i;
    j["gpu"] = r.per_rank[i].gpu;
    j["represents"] = r.per_rank[i].represents;
    per_rank_time.push_back(j);
  }
  json per_rank_mem = json::array();
  for (const RankMemory& m : r.memory) {
    per_rank_mem.push_back(json{{"rank", m.rank},
                                {"gpu", m.gpu},
                                {"represents", m.represents},
                                {"peak_bytes", m.bytes.total()},
                                {"capacity_bytes", m.capacity},
                                {"oom", m.oom},
                                {"overflow_bytes", m.overflow},
                                {"weights_bytes", m.bytes.weights},
                                {"gradients_bytes", m.bytes.gradients},
                                {"optimizer_bytes", m.bytes.optimizer},
                                {"activations_bytes", m.bytes.activations},
                                {"buffers_bytes", m.bytes.buffers},
                                {"workspace_bytes", m.bytes.workspace},
                                {"allocator_bytes", m.bytes.allocator}});
  }
  json b = rank_json(r.breakdown);
  b["rank"] = r.slowest_rank;
  b["per_rank"] = per_rank_time;
  json measured = nullptr;
  if (r.measured.present) {
    measured = {{"measured_s", r.measured.measured_s}, {"predicted_s", r.measured.predicted_s},
                {"of", r.measured.whole_run ? "run" : "iteration"}, {"role", r.measured.role},
                {"source", r.measured.source}, {"compared", !r.measured.changed},
                {"error_pct", r.measured.changed ? json(nullptr) : json(r.measured.error_pct())}};
  }
  json doc = json{{"scenario", r.scenario},
              {"model", {{"name", r.model}, {"params", r.model_params}, {"fwd_flops_per_sample", r.model_fwd_flops}}},
              {"cluster", {{"name", r.cluster}, {"gpu", r.gpu}, {"gpus", r.gpus}, {"nodes", r.nodes}}},
              {"iteration_time_s", r.iteration_time_s},
              {"steps", r.steps_total},
              {"run_time_s", r.run_time_s},
              {"throughput",
               {{"samples_per_s", r.samples_per_s},
                {"tokens_per_s", r.tokens_per_s},
                {"tflops_per_gpu", r.tflops_per_gpu},
                {"mfu", r.mfu},
                {"hardware_tflops_per_gpu", r.hardware_tflops_per_gpu},
                {"hfu", r.hfu},
                {"peak_tflops_per_gpu", r.peak_tflops}}},
              {"breakdown", b},
              {"memory", {{"peak_bytes_max", r.peak_bytes_max()}, {"oom", r.oom()}, {"per_rank", per_rank_mem}}},
              {"plan", plan},
              {"cost", cost_json(r.cost)},
              {"pipeline", pipeline_json(r)},
              {"moe", moe_json(r)},
              {"simulation",
               {{"kernels", r.kernels},
                {"kernels_profiled", r.kernels_profiled},
                {"gradient_buckets", r.gradient_buckets},
                {"events", r.events},
                {"simulated_ranks", r.simulated_ranks},
                {"folding", r.folding.empty() ? json(nullptr) : json(r.folding)},
                {"folding_exact", r.folding.empty() ? json(nullptr) : json(r.folding_uneven == 0)},
                {"folding_spread_s", r.folding_spread_s},
                {"fingerprint", fmt::format("{:016x}", r.fingerprint)}}}};
  if (r.measured.present) doc["measured"] = measured;
  return doc;
}

std::string grouped_whole(double v) {
  const std::string digits = fmt::format("{:.0f}", v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && digits[i - 1] != '-' && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string to_text(const Report& r) {
  std::string out;
  out += fmt::format("scenario    {}\n", r.scenario);
  out += fmt::format("model       {}: {:.2f} M parameters, {} forward per sample\n", r.model,
                     static_cast<double>(r.model_params) * 1e-6, flop_text(r.model_fwd_flops));
  out += fmt::format("cluster     {}: {} x {} on {} node{}\n", r.cluster, r.gpus, r.gpu, r.nodes, r.nodes == 1 ? "" : "s");
  out += fmt::format("plan        {}\n", r.plan_summary);
  if (!r.folding.empty()) {
    out += fmt::format("simulation  {}{}\n", r.folding,
                       r.folding_uneven == 0
                           ? std::string()
                           : fmt::format("; groups of {} folded collective{} or transfer{} ended up to {} apart, "
                                         "so replicas may differ by that much (plan.fold false simulates each)",
                                         r.folding_uneven, r.folding_uneven == 1 ? "" : "s",
                                         r.folding_uneven == 1 ? "" : "s", seconds_text(r.folding_spread_s)));
  }
  out += fmt::format("iteration   {}\n", seconds_text(r.iteration_time_s));
  out += fmt::format("run         {} steps: {}\n", r.steps_total, run_text(r.run_time_s));
  out += fmt::format("throughput  {:.1f} samples/s{}, {:.2f} TFLOP/s per GPU, MFU {:.1f}% of {:.0f} TFLOP/s\n",
                     r.samples_per_s, r.tokens_per_s > 0 ? fmt::format(" ({:.0f} tokens/s)", r.tokens_per_s) : "",
                     r.tflops_per_gpu, r.mfu * 100.0, r.peak_tflops);
  if (r.hardware_tflops_per_gpu > r.tflops_per_gpu * 1.005) {
    out += fmt::format("            hardware {:.2f} TFLOP/s per GPU with recompute, HFU {:.1f}%\n",
                       r.hardware_tflops_per_gpu, r.hfu * 100.0);
  }
  if (r.measured.present) {
    const MeasuredComparison& m = r.measured;
    if (m.changed) {
      out += fmt::format("measured    {} {} ({}); not compared: the command line changed the scenario\n",
                         seconds_text(m.measured_s), m.whole_run ? "run" : "per iteration", m.source);
    } else {
      out += fmt::format("measured    {} {} ({}): predicted {:+.1f}%, {}\n", seconds_text(m.measured_s),
                         m.whole_run ? "run" : "per iteration", m.source, m.error_pct(),
                         m.role == "calibration" ? "a calibration case (constants were fitted to it)"
                                                 : "a prediction (no constant was fitted to it)");
    }
  }
  if (r.cost.priced || r.cost.powered || !r.cost.note.empty()) {
    std::string cost = fmt::format("{} GPU-hours", amount(r.cost.gpu_hours_run));
    if (r.cost.priced) cost += fmt::format(", ${} (${:.4g} per iteration)", amount(r.cost.usd_run), r.cost.usd_per_iteration);
    if (r.cost.powered) cost += fmt::format(", {} kWh at board and server power", amount(r.cost.kwh_run));
    if (!r.cost.note.empty()) cost += fmt::format(" ({})", r.cost.note);
    out += fmt::format("cost        {}\n", cost);
  }
  const RankBreakdown& b = r.breakdown;
  out += fmt::format(
      "breakdown   per iteration, rank {} (slowest): compute {}, exposed communication {} (of {} in all), "
      "bubble {}, host-bound idle {}\n",
      r.slowest_rank, seconds_text(b.compute_s), seconds_text(b.exposed_comm_s), seconds_text(b.comm_s),
      seconds_text(b.bubble_s), seconds_text(b.host_s));
  out += fmt::format("time goes   {}\n", where_time_goes(b));
  for (const StageReport& st : r.stages) {
    const auto ri = static_cast<std::size_t>(st.rank);
    std::string chunks;
    const auto chunk_text = [](const auto& c) {
      return fmt::format("{}..{} ({} unit{}, {:.2f} M params, {} modelled)", c.first_layer, c.last_layer, c.units,
                         c.units == 1 ? "" : "s", static_cast<double>(c.params) * 1e-6, seconds_text(c.modelled_s));
    };
    if (st.chunks.size() <= 2) {
      for (const auto& c : st.chunks) chunks += (chunks.empty() ? "" : "; ") + chunk_text(c);
    } else {
      // Many virtual stages: their sum, the first and the last (--json lists every one).
      int units = 0;
      double params = 0.0, modelled = 0.0;
      for (const auto& c : st.chunks) {
        units += c.units;
        params += static_cast<double>(c.params);
        modelled += c.modelled_s;
      }
      chunks = fmt::format("{} chunks, {} units, {:.2f} M params, {} modelled: {}; ...; {}", st.chunks.size(), units,
                           params * 1e-6, seconds_text(modelled), chunk_text(st.chunks.front()),
                           chunk_text(st.chunks.back()));
    }
    const RankBreakdown* sb = ri < r.per_rank.size() ? &r.per_rank[ri] : nullptr;
    const RankMemory* sm = ri < r.memory.size() ? &r.memory[ri] : nullptr;
    out += fmt::format("{}stage {}: {}; compute {}, bubble {}; {} micro-batch{} in flight, peak {}\n",
                       st.stage == 0 ? fmt::format("{:<12}", r.schedule) : std::string(12, ' '), st.stage, chunks,
                       sb ? seconds_text(sb->compute_s) : "-", sb ? seconds_text(sb->bubble_s) : "-", st.in_flight,
                       st.in_flight == 1 ? "" : "es", sm ? bytes_text(sm->bytes.total()) : "-");
  }
  if (!r.expert_loads.empty()) {
    double lo = r.expert_loads.front().tokens, hi = lo, sum = 0.0;
    for (const ExpertLoad& l : r.expert_loads) {
      lo = std::min(lo, l.tokens);
      hi = std::max(hi, l.tokens);
      sum += l.tokens;
    }
    const double mean = sum / static_cast<double>(r.expert_loads.size());
    out += fmt::format("experts     {} routing: {:.0f}-{:.0f} tokens per rank per iteration (max/mean {:.2f}); "
                       "imbalance costs {} per iteration{}\n",
                       r.moe_routing, lo, hi, mean > 0 ? hi / mean : 0.0, seconds_text(r.moe_imbalance_s),
                       r.moe_dropped_tokens > 0 ? fmt::format("; {:.0f} assignments dropped per EP group", r.moe_dropped_tokens) : "");
  }
  if (!r.memory.empty()) {
    const RankMemory& m = *std::max_element(r.memory.begin(), r.memory.end(), [](const RankMemory& a, const RankMemory& c) {
      return a.bytes.total() < c.bytes.total();
    });
    out += fmt::format(
        "memory      peak {} of {} on rank {}{} (weights {}, gradients {}, optimizer {}, activations {}, buffers {}, "
        "workspace {}, allocator {}): {}\n",
        bytes_text(m.bytes.total()), bytes_text(m.capacity), m.rank,
        m.represents > 1 ? fmt::format(" (and the {} GPU{} it stands for)", m.represents - 1, m.represents == 2 ? "" : "s")
                         : std::string(),
        bytes_text(m.bytes.weights),
        bytes_text(m.bytes.gradients), bytes_text(m.bytes.optimizer), bytes_text(m.bytes.activations),
        bytes_text(m.bytes.buffers), bytes_text(m.bytes.workspace), bytes_text(m.bytes.allocator),
        m.oom ? fmt::format("OUT OF MEMORY by {}", bytes_text(m.overflow)) : std::string("fits"));
  }
  return out;
}

}  // namespace foresight::strategy
