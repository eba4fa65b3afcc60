#include "run/planner.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "exec/graph_check.hpp"
#include "exec/path_bound.hpp"
#include "models/compute_model.hpp"
#include "strategies/memory_model.hpp"
#include "strategies/pipeline.hpp"
#include "strategies/rank_emitter.hpp"
#include "strategies/tensor_parallel.hpp"
#include "topologies/cluster_builders.hpp"

namespace foresight::strategy {
namespace {

using nlohmann::json;

std::vector<int> powers_of_two_up_to(int limit) {
  std::vector<int> out;
  for (int v = 1; v <= limit; v *= 2) out.push_back(v);
  return out;
}

/// The message of a reader error without the file it names ("/plan/tp: expected ...").
std::string reason_of(const std::string& message, const std::string& path) {
  const std::string prefix = path + ": ";
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

/// A lower bound on the iteration time: every GPU's share of the step's FLOPs (with the recomputed
/// forward under full recompute) at the GPU's dense peak times the compute model's GEMM cap (no
/// kernel runs faster, unless a profile says so or gemm_efficiency exceeds 1), stretched by the
/// pipeline's fill and drain, (pp - 1) / (micro-batches x virtual stages) of a step.
double lower_bound(const Model& model, const Plan& plan, const ComputeModel& compute, int cc, int gpus,
                   bool profiled) {
  const double fwd = model.fwd_flops() * plan.global_batch;
  const double flops = fwd + model.bwd_flops() * plan.global_batch + (plan.recompute == Recompute::full ? fwd : 0.0);
  OpTemplate probe;
  // With FP8 the fastest kernels run at the FP8 peak: the bound takes it for every FLOP.
  probe.math = model.transformer ? (plan.fp8 ? MathKind::matmul_fp8 : MathKind::matmul) : MathKind::conv;
  double rate = compute.peak(instantiate(probe, 1, plan, cc).dtype).per_second();
  if (!profiled) rate *= compute.constants().gemm_cap;
  rate *= std::max(1.0, plan.gemm_efficiency);
  const double per_gpu = flops / gpus / rate;
  const double bubble = plan.pp > 1 ? (plan.pp - 1.0) / (plan.grad_accum * std::max(1, plan.virtual_stages)) : 0.0;
  return per_gpu * (1.0 + bubble);
}

/// Another lower bound, from the compiled graph: a GPU stream runs its kernels one at a time, so
/// no step is shorter than the busiest (rank, stream)'s kernel time per step. A pipeline also
/// fills and drains: its step is at least the least busy rank's micro-batch kernel time (its
/// forward and backward passes, not the step's own work such as the optimizer's) stretched by
/// (pp - 1) / (micro-batches x virtual stages), as the FLOPs bound is.
double stream_bound(const sim::ExecutionGraph& g, const Plan& plan) {
  // Per rank and stream: its kernels' time, and their time in micro-batches (-1: none there).
  std::vector<std::vector<std::int64_t>> busy(g.ranks());
  std::vector<std::vector<std::int64_t>> micro_busy(g.ranks());
  for (const sim::Node& n : g.nodes) {
    if (n.kind != sim::OpKind::compute) continue;
    std::vector<std::int64_t>& b = busy[n.rank];
    std::vector<std::int64_t>& m = micro_busy[n.rank];
    if (b.size() <= n.stream) {
      b.resize(n.stream + 1, 0);
      m.resize(n.stream + 1, -1);
    }
    b[n.stream] += n.duration.ps();
    if (n.micro_batch >= 0) m[n.stream] = std::max<std::int64_t>(m[n.stream], 0) + n.duration.ps();
  }
  std::int64_t most = 0;
  for (const auto& streams : busy) {
    for (const std::int64_t ps : streams) most = std::max(most, ps);
  }
  std::int64_t least = most;
  for (const auto& streams : micro_busy) {
    const std::int64_t busiest = streams.empty() ? -1 : *std::max_element(streams.begin(), streams.end());
    if (busiest >= 0) least = std::min(least, busiest);  // a rank with micro-batch kernels
  }
  const double steps = std::max(1, plan.steps);
  const double bubble = plan.pp > 1 ? (plan.pp - 1.0) / (plan.grad_accum * std::max(1, plan.virtual_stages)) : 0.0;
  return std::max(sim::Time::from_ps(most).seconds(), sim::Time::from_ps(least).seconds() * (1.0 + bubble)) / steps;
}

bool better(const PlanRow& a, const PlanRow& b) {
  if (a.iteration_s != b.iteration_s) return a.iteration_s < b.iteration_s;
  return a.label < b.label;
}

}  // namespace

double plan_memory_floor(const Model& model, const Plan& plan) {
  if (plan.pp <= 1) return data_parallel_memory(model, plan).total();
  return pipeline_rank_memory(tp_rank_params(model, plan.tp, 0, 0, plan.ep, plan.etp()) / plan.pp, plan, 0.0, 0,
                              tp_rank_expert_params(model, plan.tp, 0, 0, plan.ep, plan.etp()) / plan.pp)
      .total();
}

sim::GpuLineRates line_rates(const topo::Cluster& cluster, const sim::LinkEfficiency& efficiency) {
  sim::GpuLineRates rates;
  const auto rate = [&](sim::LinkId l) { return cluster.link(l).capacity * efficiency.of(cluster.link(l).cls); };
  for (std::size_t g = 0; g < cluster.gpu_count(); ++g) {
    const topo::DeviceId device = cluster.gpu_device(static_cast<sim::GpuId>(g));
    sim::Bandwidth out, in;
    for (const sim::LinkId l : cluster.out_links(device)) out = out + rate(l);
    for (const sim::LinkId l : cluster.in_links(device)) in = in + rate(l);
    rates.egress.push_back(out);
    rates.ingress.push_back(in);
    rates.node.push_back(cluster.device(device).node);
  }
  rates.node_egress.resize(cluster.node_count());
  rates.node_ingress.resize(cluster.node_count());
  for (sim::LinkId l = 0; l < cluster.link_count(); ++l) {
    const topo::LinkEnds ends = cluster.link_ends(l);
    const int from = cluster.device(ends.from).node;
    const int to = cluster.device(ends.to).node;
    if (from == to) continue;
    const sim::Bandwidth c = rate(l);
    if (from >= 0) rates.node_egress[static_cast<std::size_t>(from)] = rates.node_egress[static_cast<std::size_t>(from)] + c;
    if (to >= 0) rates.node_ingress[static_cast<std::size_t>(to)] = rates.node_ingress[static_cast<std::size_t>(to)] + c;
  }
  return rates;
}

std::vector<double> path_bounds(const CompiledGraph& c, const sim::GraphIndex& index, const Plan& plan,
                                const sim::GpuLineRates& rates, std::span<const sim::RankId> ranks) {
  const int steps = static_cast<int>(c.step_end.size());
  std::vector<double> out(ranks.size(), 0.0);
  if (steps == 0 || ranks.empty()) return out;
  const SteadyWindow window = steady_window(plan, steps);
  std::vector<std::pair<sim::NodeId, sim::NodeId>> pairs;
  for (const sim::RankId rank : ranks) {
    const sim::NodeId from = steps > 1 ? c.step_end[static_cast<std::size_t>(window.first)][rank] : sim::kRunStart;
    pairs.emplace_back(from, c.step_end.back()[rank]);
  }
  const auto bounds = sim::path_lower_bounds(c.graph, index, rates, pairs);
  for (std::size_t k = 0; k < bounds.size(); ++k) {
    if (bounds[k]) out[k] = bounds[k]->seconds() / window.count;
  }
  return out;
}

std::string_view to_string(PlanRow::Bound b) {
  switch (b) {
    case PlanRow::Bound::flops:
      return "FLOPs at peak";
    case PlanRow::Bound::stream:
      return "busiest stream";
    case PlanRow::Bound::path:
      return "chain of ops in order";
  }
  return "?";
}

std::string_view to_string(PlanRow::Status s) {
  switch (s) {
    case PlanRow::Status::best:
      return "best";
    case PlanRow::Status::fits:
      return "fits";
    case PlanRow::Status::invalid:
      return "invalid";
    case PlanRow::Status::memory:
      return "over memory";
    case PlanRow::Status::oom:
      return "out of memory";
    case PlanRow::Status::bound:
      return "pruned by bound";
  }
  return "?";
}

std::vector<std::string> PlanRow::sets() const {
  std::vector<std::string> out;
  for (const auto& [key, value] : plan.items()) {
    out.push_back(fmt::format("plan.{}={}", key, value.is_string() ? value.get<std::string>() : value.dump()));
  }
  return out;
}

PlanSpace default_plan_space(const Model& model, const topo::Cluster& cluster) {
  PlanSpace s;
  int per_node = 0;
  const int node = cluster.gpu(0).node;
  for (std::size_t g = 0; g < cluster.gpu_count(); ++g) per_node += cluster.gpu(static_cast<sim::GpuId>(g)).node == node;
  s.tp = model.transformer ? powers_of_two_up_to(std::max(1, per_node)) : std::vector<int>{1};
  const int units = static_cast<int>(partition_units(model).size());
  s.pp = powers_of_two_up_to(std::min(64, std::max(1, units)));
  s.virtual_stages = {1, 2};
  s.micro_batch = {1, 2, 4, 8};
  s.recompute = model.transformer ? std::vector<std::string>{"none", "selective", "full"}
                                  : std::vector<std::string>{"none", "full"};
  s.zero = {0, 1};  // ZeRO-1 shards expert states too (over the expert-data-parallel group)
  s.ep = {1};
  const int experts = model.transformer ? model.transformer->moe.experts : 0;
  for (int e = 2; e <= std::min(64, experts); e *= 2) {
    if (experts % e == 0) s.ep.push_back(e);
  }
  s.sequence_parallel = model.transformer ? std::vector<bool>{false, true} : std::vector<bool>{false};
  s.expert_tp = experts > 0 ? std::vector<int>{0, 1} : std::vector<int>{0};
  return s;
}

namespace {

/// The search's base: the scenario as given, or, when its own plan does not fit the cluster size
/// (a hardware comparison resizes clusters), the scenario with the fields the search sets taken
/// out, keeping its model, cluster, global batch and every other plan field.
Scenario search_base(const json& doc, const std::string& path) {
  try {
    return parse_scenario(doc, path);
  } catch (const sim::ConfigError&) {
    const json* cluster = doc.contains("cluster") ? &doc["cluster"] : nullptr;
    const json* plan = doc.contains("plan") ? &doc["plan"] : nullptr;
    if (cluster == nullptr || plan == nullptr || !cluster->is_object() || !plan->is_object() ||
        !cluster->contains("gpus") || !plan->contains("global_batch") || !(*cluster)["gpus"].is_number_integer()) {
      throw;
    }
    json relaxed = doc;
    json& p = relaxed["plan"];
    for (const char* k : {"tp", "pp", "dp", "virtual_stages", "schedule", "partition", "sequence_parallel", "grad_accum",
                          "micro_batch", "stragglers"}) {
      p.erase(k);
    }
    p["dp"] = p.contains("ep") ? p["ep"] : json(1);
    relaxed["cluster"].erase("gpus");
    Scenario s = parse_scenario(relaxed, path);
    s.cluster.gpus = (*cluster)["gpus"].get<int>();
    return s;
  }
}

}  // namespace

PlanSearch search_plans(const std::string& path, const std::vector<Override>& overrides, const PlanSpace& space,
                        const PlanOptions& options, const SimulationInputs& inputs,
                        const std::function<void(const std::string&)>& progress) {
  const topo::JsonReader reader(path, sim::ErrorKind::config);
  json doc = reader.parse_file();
  apply_overrides(doc, overrides);
  return search_document(path, doc, space, options, inputs, progress);
}

PlanSearch search_document(const std::string& path, const json& doc, const PlanSpace& given, const PlanOptions& options,
                        const SimulationInputs& inputs, const std::function<void(const std::string&)>& progress) {
  const Scenario base = search_base(doc, path);
  const int gpus = base.cluster.gpus > 0 ? base.cluster.gpus
                                         : static_cast<int>(base.plan.ranks());
  const int global_batch = base.plan.global_batch;
  SimulationInputs shared = inputs;
  if (!shared.cluster) {
    try {
      shared.cluster = std::make_shared<const topo::Cluster>(topo::resolve_cluster(base.cluster.spec, base.cluster.gpus));
    } catch (const sim::ConfigError& e) {
      throw sim::ConfigError(fmt::format("{}: /cluster: {}", path, e.what()));
    }
  }
  const topo::Cluster& cluster = *shared.cluster;
  const Model base_model = scenario_model(base);  // no plan pads it: its FLOPs are a lower bound
  PlanSpace space = given;
  {
    const PlanSpace d = default_plan_space(base_model, cluster);
    if (space.tp.empty()) space.tp = d.tp;
    if (space.pp.empty()) space.pp = d.pp;
    if (space.virtual_stages.empty()) space.virtual_stages = d.virtual_stages;
    if (space.micro_batch.empty()) space.micro_batch = d.micro_batch;
    if (space.recompute.empty()) space.recompute = d.recompute;
    if (space.zero.empty()) space.zero = d.zero;
    if (space.sequence_parallel.empty()) space.sequence_parallel = d.sequence_parallel;
    if (space.ep.empty()) space.ep = d.ep;
    // A base plan's own expert TP (other than its tp) is kept at every tp; otherwise models with
    // experts try split as TP and whole.
    const bool own = base.plan.expert_tp == 1 || (base.plan.expert_tp > 0 && base.plan.expert_tp != base.plan.tp);
    if (space.expert_tp.empty()) space.expert_tp = own ? std::vector<int>{base.plan.expert_tp} : d.expert_tp;
  }
  const bool moe = base_model.transformer && base_model.transformer->moe.experts > 0;

  // 1. Every combination, checked by the scenario reader.
  struct Candidate {
    PlanRow row;
    Scenario scenario;
  };
  std::vector<Candidate> candidates;
  PlanSearch search;
  std::vector<std::pair<int, int>> tp_ep;
  for (const int tp : space.tp) {
    for (const int ep : space.ep) tp_ep.emplace_back(tp, ep);
  }
  std::vector<std::pair<bool, int>> sp_etp;  // (sequence parallelism, expert TP: 0 for tp)
  for (const bool sp : space.sequence_parallel) {
    for (const int e : space.expert_tp) sp_etp.emplace_back(sp, e);
  }
  for (const auto& [tp, ep] : tp_ep) {
    for (const int pp : space.pp) {
      for (const int vs : space.virtual_stages) {
        if (vs > 1 && pp == 1) continue;  // the same plan as vs = 1
        for (const int mb : space.micro_batch) {
          for (const std::string& rc : space.recompute) {
            for (const int zero : space.zero) {
              for (const auto& [sp, etp] : sp_etp) {
                if (sp && tp == 1) continue;  // sequence parallelism splits a TP group
                // Experts split over e < tp TP ranks need TP ranks that are EP ranks too, under
                // sequence parallelism; elsewhere the plan is expert TP = TP's, or not one. The
                // plan then takes dp x e x pp x ep x cp GPUs.
                const bool own_etp = etp > 0 && etp < tp;
                if (etp > 0 && !(own_etp && tp % etp == 0 && ep > 1 && sp && ep % (tp / etp) == 0)) continue;
                const int ranks = (own_etp ? etp : tp) * pp * ep * base.plan.cp;
                if (ranks > gpus) continue;  // not a plan for this many GPUs
                PlanRow row;
                row.label = fmt::format("tp {} pp {}{} dp {}{} vs {} mb {} recompute {} zero {}{}", tp, pp,
                                        moe || ep > 1 ? fmt::format(" ep {}", ep) : "",
                                        ranks > 0 && gpus % ranks == 0 ? std::to_string(gpus / ranks) : "-",
                                        base.plan.cp > 1 ? fmt::format(" cp {}", base.plan.cp) : "", vs, mb, rc, zero,
                                        std::string(sp ? " sp" : "") + (own_etp ? fmt::format(" expert_tp {}", etp) : ""));
                if (ranks <= 0 || gpus % ranks != 0) {
                  row.status = PlanRow::Status::invalid;
                  row.reason = fmt::format("{} = {} does not divide the {} GPUs",
                                           own_etp ? "expert_tp x pp x ep x cp" : "tp x pp x ep x cp", ranks, gpus);
                  search.rows.push_back(std::move(row));
                  continue;
                }
                row.plan = json{{"tp", tp},          {"pp", pp},         {"dp", gpus / ranks},
                                {"micro_batch", mb}, {"recompute", rc},  {"zero", zero},
                                {"global_batch", global_batch}};
                if (tp > 1) row.plan["sequence_parallel"] = sp;
                if (moe || ep > 1) row.plan["ep"] = ep;
                if (own_etp) row.plan["expert_tp"] = etp;
                if (pp > 1) {
                  row.plan["schedule"] = vs > 1 ? "interleaved" : "1f1b";
                  row.plan["virtual_stages"] = vs;
                } else {
                  row.plan["schedule"] = "none";
                }
                json d = doc;
                json& plan = d["plan"];
                for (const char* k : {"grad_accum", "virtual_stages", "schedule", "sequence_parallel", "expert_tp"}) {
                  plan.erase(k);
                }
                if (plan.contains("partition") && plan["partition"].is_array()) plan.erase("partition");
                for (const auto& [k, v] : row.plan.items()) plan[k] = v;
                try {
                  Scenario s = parse_scenario(d, path);
                  candidates.push_back(Candidate{std::move(row), std::move(s)});
                } catch (const sim::ConfigError& e) {
                  row.status = PlanRow::Status::invalid;
                  row.reason = reason_of(e.what(), path);
                  search.rows.push_back(std::move(row));
                }
              }
            }
          }
        }
      }
    }
  }

  // 2. Cheapest bound first: each candidate's FLOPs bound (no compile needed), lowest first.
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t jobs = options.jobs > 0 ? static_cast<std::size_t>(options.jobs) : hw;
  const ComputeModel compute(cluster.gpu_model(0), inputs.profiles);
  const int cc = cluster.gpu_model(0).compute_capability;
  const sim::GpuLineRates rates = line_rates(cluster, inputs.collectives.links);
  double largest_memory = 0.0;
  for (std::size_t g = 0; g < cluster.gpu_count(); ++g) {
    largest_memory = std::max(largest_memory, cluster.gpu_model(static_cast<sim::GpuId>(g)).memory.as_double());
  }
  std::vector<Candidate> kept;
  for (Candidate& c : candidates) {
    // The model's own tensor-parallel rules (heads divisible), as the compilers check them; the
    // pipeline's (blocks per stage) are checked when a candidate is compiled.
    try {
      check_tensor_parallel(base_model, c.scenario.plan);
    } catch (const sim::ConfigError& e) {
      c.row.status = PlanRow::Status::invalid;
      c.row.reason = reason_of(e.what(), path);
      search.rows.push_back(std::move(c.row));
      continue;
    }
    // Over the memory limit before compiling: no compile needed to leave it out. The floor takes
    // the model as the plan runs it (fused attention saves no scores, FP8 1-byte inputs, eager
    // kernels their own dtypes), or it would not be a floor.
    double floor = 0.0;
    try {
      floor = plan_memory_floor(plan_model(c.scenario, c.scenario.plan), c.scenario.plan);
    } catch (const sim::ConfigError& e) {
      c.row.status = PlanRow::Status::invalid;
      c.row.reason = reason_of(e.what(), path);
      search.rows.push_back(std::move(c.row));
      continue;
    }
    const double limit = largest_memory * (1.0 - options.memory_margin);
    if (floor > limit) {
      c.row.status = PlanRow::Status::memory;
      c.row.peak_bytes = floor;
      c.row.capacity = largest_memory;
      c.row.reason = fmt::format("at least {:.1f} GiB ({}) above {:.1f} GiB ({:.0f}% of {:.0f} GiB)",
                                 floor / (1 << 30),
                                 c.scenario.plan.pp > 1 ? "model states and buffers" : "the data-parallel rank's peak", limit / (1 << 30), 100.0 * (1.0 - options.memory_margin),
                                 largest_memory / (1 << 30));
      search.rows.push_back(std::move(c.row));
      continue;
    }
    c.row.bound_s = lower_bound(base_model, c.scenario.plan, compute, cc, gpus, inputs.profiles != nullptr);
    kept.push_back(std::move(c));
  }
  candidates = std::move(kept);
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.row.bound_s < b.row.bound_s; });

  // 3. In bound order, on `jobs` threads without rounds: candidate i is weighed against the
  // top-th best of the candidates before i - lag (lag 0 on one thread, jobs - 1 + 8 on more),
  // which are done before it is taken up (a thread waits when a slower one still holds one of
  // them), so that what is pruned depends on i and jobs alone, not on thread timing. The slack of
  // 8 lets the threads pass a long candidate by 8 before they wait; what it costs is a threshold
  // that sees up to lag fewer results. A candidate whose bound is no better is pruned; the
  // others are compiled, checked against the memory limit, bounded again by their busiest
  // stream, and simulated.
  const std::size_t top = static_cast<std::size_t>(std::max(1, options.top));
  const auto prune = [&](PlanRow& row, double threshold) {
    row.status = PlanRow::Status::bound;
    row.reason = fmt::format("lower bound {:.4g} s ({}), no better than the {}th best {:.4g} s", row.bound_s,
                             to_string(row.bound_by), top, threshold);
  };
  const std::size_t count = candidates.size();
  const std::size_t lag = jobs > 1 ? jobs - 1 + 8 : 0;
  std::vector<char> compiled_ones(count, 0);
  std::vector<char> one_block(count, 0);
  std::vector<char> done(count, 0);
  std::size_t next = 0;
  std::size_t done_before = 0;  // candidates [0, done_before) are done
  std::mutex lock;
  std::condition_variable progressed;
  // The top-th best iteration among the fitting candidates of [0, end); all of them done.
  const auto threshold_of = [&](std::size_t end) {
    std::vector<double> times;
    for (std::size_t k = 0; k < end; ++k) {
      if (candidates[k].row.status == PlanRow::Status::fits) times.push_back(candidates[k].row.iteration_s);
    }
    if (times.size() < top) return std::numeric_limits<double>::infinity();
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(top - 1), times.end());
    return times[top - 1];
  };
  // The third bound, once a threshold exists: rank 0's chain (a pipeline's first stage, which
  // waits for the whole pipeline's fill and drain). The graph's check it needs is kept for the
  // simulation.
  const auto path_prunes = [&](SimulationOutput& compiled, const Plan& plan, PlanRow& row, double threshold) {
    compiled.index = sim::check_graph(compiled.compiled.graph, cluster);
    const sim::RankId first = 0;
    const double path = path_bounds(compiled.compiled, *compiled.index, plan, rates, {&first, 1}).front();
    if (path > row.bound_s) {
      row.bound_s = path;
      row.bound_by = PlanRow::Bound::path;
    }
    return row.bound_s >= threshold;
  };
  // A candidate is first compiled with replicas folded as if every block sat as the first
  // (plan.fold_as_alike): where placements differ (blocks straddling racks in other ways) that
  // graph holds one block's ranks instead of one per placement. Its memory and busiest stream
  // are the plan's (ranks' programs do not depend on where they sit), and rank 0's chain in it
  // is no longer than in the whole graph (the same ops and own groups, fewer members to wait
  // for at collectives across blocks): a bound for a fraction of the compile. Only a candidate
  // that bound does not prune is compiled whole, bounded by its whole chain, and simulated.
  const auto compile_for_bounds = [&](Scenario& scenario) {
    struct Reset {
      Plan& plan;
      ~Reset() { plan.fold_as_alike = false; }
    } reset{scenario.plan};
    scenario.plan.fold_as_alike = true;
    return compile_scenario(scenario, shared);
  };
  // One block's graph did not prune the candidate: it is compiled whole and bounded again by
  // rank 0's whole chain (which waits for every placement), then simulated.
  const auto whole_prunes = [&](SimulationOutput& compiled, Candidate& c, double threshold) {
    compiled = compile_scenario(c.scenario, shared);
    return std::isfinite(threshold) && path_prunes(compiled, c.scenario.plan, c.row, threshold);
  };
  auto worker = [&] {
    for (;;) {
      std::size_t i = 0;
      double threshold = 0.0;
      {
        std::unique_lock<std::mutex> g(lock);
        if (next >= count) return;
        i = next++;
        const std::size_t seen = i > lag ? i - lag : 0;
        progressed.wait(g, [&] { return done_before >= seen; });
        threshold = threshold_of(seen);
      }
      Candidate& c = candidates[i];
      bool simulated = false;
      std::string error;
      if (c.row.bound_s >= threshold) {
        prune(c.row, threshold);
      } else {
        compiled_ones[i] = 1;
        try {
          // Before there is a best to beat only memory can leave it out, the same on either graph.
          SimulationOutput compiled =
              std::isfinite(threshold) ? compile_for_bounds(c.scenario) : compile_scenario(c.scenario, shared);
          one_block[i] = compiled.compiled.bounds_only ? 1 : 0;
          for (const RankMemory& m : compiled.report.memory) {
            if (m.bytes.total() > c.row.peak_bytes) {
              c.row.peak_bytes = m.bytes.total();
              c.row.capacity = m.capacity;
            }
          }
          const double limit = c.row.capacity * (1.0 - options.memory_margin);
          const double stream = stream_bound(compiled.compiled.graph, c.scenario.plan);
          if (stream > c.row.bound_s) {
            c.row.bound_s = stream;
            c.row.bound_by = PlanRow::Bound::stream;
          }
          if (c.row.peak_bytes > limit) {
            c.row.status = PlanRow::Status::memory;
            c.row.reason = fmt::format("peak {:.1f} GiB above {:.1f} GiB ({:.0f}% of {:.0f} GiB)",
                                       c.row.peak_bytes / (1 << 30), limit / (1 << 30),
                                       100.0 * (1.0 - options.memory_margin), c.row.capacity / (1 << 30));
          } else if (c.row.bound_s >= threshold || (std::isfinite(threshold) && path_prunes(compiled, c.scenario.plan, c.row, threshold))) {
            prune(c.row, threshold);
          } else if (compiled.compiled.bounds_only && whole_prunes(compiled, c, threshold)) {
            prune(c.row, threshold);
          } else {
            const SimulationOutput out = simulate_compiled(std::move(compiled), c.scenario, shared);
            simulated = true;
            c.row.iteration_s = out.report.iteration_time_s;
            c.row.run_s = out.report.run_time_s;
            c.row.samples_per_s = out.report.samples_per_s;
            c.row.tokens_per_s = out.report.tokens_per_s;
            c.row.mfu = out.report.mfu;
            c.row.peak_bytes = out.report.peak_bytes_max();
            if (out.report.cost.priced) c.row.usd_run = out.report.cost.usd_run;
            if (out.report.cost.powered) c.row.kwh_run = out.report.cost.kwh_run;
            c.row.status = out.report.oom() ? PlanRow::Status::oom : PlanRow::Status::fits;
            if (out.report.oom()) c.row.reason = "out of memory in simulation (MoE dispatch buffers)";
          }
        } catch (const sim::Error& e) {
          error = e.what();
          c.row.status = PlanRow::Status::invalid;
          c.row.reason = reason_of(error, path);
        }
      }
      const std::lock_guard<std::mutex> g(lock);
      if (progress && (simulated || !error.empty())) {
        progress(fmt::format("{}: {}", c.row.label,
                             error.empty() ? fmt::format("{:.4g} s", c.row.iteration_s) : error));
      }
      done[i] = 1;
      while (done_before < count && done[done_before]) ++done_before;
      progressed.notify_all();
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < std::min(jobs, count); ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  std::vector<PlanRow> fitting;
  for (std::size_t i = 0; i < count; ++i) {
    Candidate& c = candidates[i];
    if (compiled_ones[i]) ++search.compiled;
    if (one_block[i]) ++search.one_block;
    if (c.row.status == PlanRow::Status::fits || c.row.status == PlanRow::Status::oom) ++search.simulated;
    if (c.row.status == PlanRow::Status::fits) {
      fitting.push_back(std::move(c.row));
    } else {
      search.rows.push_back(std::move(c.row));
    }
  }
  std::sort(fitting.begin(), fitting.end(), better);
  if (!fitting.empty()) fitting.front().status = PlanRow::Status::best;
  std::vector<PlanRow> rows = std::move(fitting);
  std::stable_sort(search.rows.begin(), search.rows.end(), [](const PlanRow& a, const PlanRow& b) {
    return static_cast<int>(a.status) < static_cast<int>(b.status);
  });
  for (PlanRow& r : search.rows) rows.push_back(std::move(r));
  search.rows = std::move(rows);
  return search;
}

}  // namespace foresight::strategy
