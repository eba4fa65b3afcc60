#include "run/simulation.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "strategies/memory_model.hpp"
#include "models/megatron_softmax.hpp"
#include "models/model_builder.hpp"
#include "strategies/pipeline.hpp"
#include "strategies/tensor_parallel.hpp"
#include "topologies/cluster_builders.hpp"

namespace foresight::strategy {
namespace {

std::string plan_summary(const Plan& p, int cc) {
  std::string prec(to_string(p.precision));
  if (p.precision == Precision::fp32 && cc >= 80) {
    prec += p.tf32_conv ? (p.tf32_matmul ? " (TF32 convolutions and matmuls)" : " (TF32 convolutions)")
                        : (p.tf32_matmul ? " (TF32 matmuls)" : "");
  }
  std::string out = fmt::format("{}, dp {}", to_string(p.framework), p.dp);
  if (p.ep > 1) out += fmt::format(", ep {}", p.ep);
  if (p.cp > 1) out += fmt::format(", cp {}", p.cp);
  if (p.pp > 1) out += fmt::format(", pp {}", p.pp);
  if (p.tp > 1) out += fmt::format(", tp {}{}", p.tp, p.sequence_parallel ? " with sequence parallelism" : "");
  if (p.ep > 1 && p.etp() != p.tp) out += fmt::format(", expert tp {}", p.etp());
  if (p.zero > 0) out += fmt::format(", ZeRO-{}", p.zero);
  if (p.hybrid_shard()) out += fmt::format(" sharded in groups of {} (hybrid)", p.shard_group);
  if (p.recompute != Recompute::none) out += fmt::format(", {} recompute", to_string(p.recompute));
  if (p.recompute == Recompute::selective && p.recompute_modules != kRecomputeCoreAttn) {
    std::string names;
    for (const auto& [name, bit] : kRecomputeModules) {
      if ((p.recompute_modules & bit) != 0) names += (names.empty() ? "" : ", ") + std::string(name);
    }
    out += fmt::format(" ({})", names.empty() ? "nothing" : names);
  }
  if (p.fused_attention) {
    out += p.attention_kernel == AttentionKernel::flash2  ? ", fused attention (FlashAttention-2)"
           : p.attention_kernel == AttentionKernel::cudnn ? ", fused attention (cuDNN)"
                                                          : ", fused attention";
  }
  if (p.kernels == Kernels::eager) out += ", eager kernels";
  if (p.kernels == Kernels::torchtitan) out += ", torchtitan's eager kernels";
  if (p.kernel_generation == KernelGeneration::megatron_2021) out += ", Megatron-LM v2 (2021) matrix kernels";
  if (p.fp8) out += ", FP8 linear layers";
  switch (p.batchnorm_fusion) {
    case BatchNormFusion::none: break;
    case BatchNormFusion::bn_relu: out += ", BatchNorm fused with ReLU and add"; break;
    case BatchNormFusion::conv_stats: out += ", BatchNorm statistics in the convolutions, fused with ReLU and add"; break;
    case BatchNormFusion::conv_mainloop:
      out += ", BatchNorm statistics in the convolutions and applied as they load, fused with ReLU and add";
      break;
  }
  out += fmt::format(", micro-batch {}, global batch {}", p.micro_batch, p.global_batch);
  if (p.grad_accum > 1) out += fmt::format(" ({} accumulation steps)", p.grad_accum);
  out += fmt::format(", {}, {}", prec, to_string(p.optimizer));
  out += p.input_rate > 0 ? fmt::format(", input {:.0f} samples/s per process", p.input_rate) : ", input unlimited";
  if (!p.straggler_gpus.empty() && p.straggler_slowdown != 1.0) {
    out += fmt::format(", GPU{} {} {:g}x slower", p.straggler_gpus.size() > 1 ? "s" : "", fmt::join(p.straggler_gpus, ", "),
                       p.straggler_slowdown);
  }
  if (p.straggler_jitter > 0.0) out += fmt::format(", per-step jitter of mean {:g}", p.straggler_jitter);
  return out;
}

/// The links a timeline shows: each used GPU's link into its NVSwitch and each used node's NIC
/// links into the fabric (at most 64).
std::vector<sim::LinkId> links_to_sample(const topo::Cluster& c, int gpus) {
  std::vector<sim::LinkId> out;
  std::vector<int> nodes;
  for (int g = 0; g < gpus && out.size() < 64; ++g) {
    if (const auto l = c.nvswitch_links(static_cast<sim::GpuId>(g))) out.push_back(l->first);
    const int node = c.gpu(static_cast<sim::GpuId>(g)).node;
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
  }
  for (const int node : nodes) {
    for (int rail = 0; rail < c.node(node).nics && out.size() < 64; ++rail) {
      const auto nic = c.nic(node, rail);
      if (!nic) continue;
      for (const sim::LinkId l : c.out_links(*nic)) {
        if (c.link(l).cls == sim::LinkClass::infiniband) {
          out.push_back(l);
          break;
        }
      }
    }
  }
  return out;
}

/// Each simulated rank's routed tokens and expert time per iteration, and the imbalance's cost.
void report_expert_loads(const SimulationOutput& out, const Plan& plan, MoeRouting& routing, Report& r) {
  const sim::ExecutionGraph& g = out.compiled.graph;
  const Model& model = out.model;
  const int steps = std::max(1, plan.steps);
  r.moe_routing = std::string(to_string(plan.routing.kind));
  if (plan.routing.kind == RoutingSpec::Kind::zipf) r.moe_routing += fmt::format(" (s = {})", plan.routing.zipf_s);
  std::vector<double> expert_s(g.ranks(), 0.0);
  // (stage, EP group, layer, micro-batch) -> each EP rank's expert time there, per iteration.
  std::map<std::tuple<int, int, int, int>, std::map<int, double>> per_layer;
  for (const sim::Node& n : g.nodes) {
    if (n.kind == sim::OpKind::compute && n.layer >= 0 && model.layers[static_cast<std::size_t>(n.layer)].experts > 0) {
      const double t = n.duration.seconds() / steps;
      expert_s[n.rank] += t;
      const auto& c = out.compiled.rank_coords[n.rank];
      // Per (stage, EP group, layer, micro-batch): the EP ranks' times.
      per_layer[{c.stage, plan.expert_group(c.replica, c.tp_rank), n.layer, n.micro_batch}]
               [plan.expert_rank(c.replica, c.tp_rank)] += t;
    }
  }
  for (sim::RankId rank = 0; rank < g.ranks(); ++rank) {
    ExpertLoad l;
    l.rank = static_cast<int>(rank);
    l.gpu = static_cast<int>(g.rank_gpu[rank]);
    l.stage = out.compiled.rank_coords[rank].stage;
    l.ep_rank = plan.expert_rank(out.compiled.rank_coords[rank].replica, out.compiled.rank_coords[rank].tp_rank);
    std::vector<std::pair<std::size_t, std::size_t>> ranges{{0, model.layers.size()}};
    if (plan.pp > 1) ranges = out.compiled.rank_chunks[rank];
    for (const auto& [first, last] : ranges) {
      for (std::size_t i = first; i < last; ++i) {
        if (model.layers[i].experts == 0) continue;
        const int local = routing.experts_per_rank(i);
        for (int micro = 0; micro < plan.grad_accum; ++micro) {
          const RoutingTable& t = routing.table(i, micro);
          for (int x = l.ep_rank * local; x < (l.ep_rank + 1) * local; ++x) l.tokens += t.expert_tokens(x);
          if (out.compiled.rank_coords[rank].replica == 0 && out.compiled.rank_coords[rank].tp_rank == 0) {
            r.moe_dropped_tokens += t.dropped;
          }
        }
      }
    }
    l.expert_s = expert_s[rank];
    r.expert_loads.push_back(l);
  }
  // With EP ranks folded (alike routing) every EP rank does what the simulated one does: no
  // imbalance.
  if (out.compiled.ep_folded) return;
  // Every MoE layer waits for its slowest EP rank (the all-to-all after the experts): the cost
  // is that rank's excess over the mean, summed over a stage's layers and micro-batches.
  std::map<std::pair<int, int>, double> stage_excess;  // per (stage, EP group)
  for (const auto& [key, by_rank] : per_layer) {
    double sum = 0.0, most = 0.0;
    for (int e = 0; e < routing.ep(); ++e) {
      const auto it = by_rank.find(e);
      const double t = it == by_rank.end() ? 0.0 : it->second;
      sum += t;
      most = std::max(most, t);
    }
    // Equal times summed in another order differ in their last bits: no excess there.
    const double excess = most - sum / routing.ep();
    stage_excess[{std::get<0>(key), std::get<1>(key)}] += excess > 1e-9 * most ? excess : 0.0;
  }
  for (const auto& [stage, excess] : stage_excess) r.moe_imbalance_s = std::max(r.moe_imbalance_s, excess);
}

/// Whether every rank's last two steps took the same time, to 1 ppm.
bool settled(const CompiledGraph& c, const sim::ExecutionResult& r) {
  const auto& ends = c.step_end;
  if (ends.size() < 3) return true;
  const auto& a = ends[ends.size() - 3];
  const auto& b = ends[ends.size() - 2];
  const auto& z = ends.back();
  for (std::size_t rank = 0; rank < z.size(); ++rank) {
    const double first = static_cast<double>((r.end[b[rank]] - r.end[a[rank]]).ps());
    const double second = static_cast<double>((r.end[z[rank]] - r.end[b[rank]]).ps());
    if (std::abs(second - first) > 1e-6 * std::max(first, second)) return false;
  }
  return true;
}

}  // namespace

SteadyWindow steady_window(const Plan& plan, int steps) {
  // A pipeline fills and settles over several steps: it is measured over its second half.
  int skip = plan.pp > 1 && steps > 2 ? steps / 2 : 0;
  // DataLoader workers deliver their batches in bursts of one per worker (each worker's k-th
  // batch at once when the loader cannot keep up): measured over the last burst's steps.
  if (plan.input_workers > 0 && steps - 1 - skip > plan.input_workers) skip = steps - 1 - plan.input_workers;
  return {skip, std::max(1, steps - 1 - skip)};
}

namespace {

/// "A100-SXM4-80GB", or for a mixed cluster "mixed: 4 A100-SXM4-80GB + 4 V100-SXM2-32GB" (the
/// first `gpus` GPUs' models, in order of first appearance).
std::string gpu_models_text(const topo::Cluster& cluster, int gpus) {
  std::vector<std::pair<std::string_view, int>> counts;
  for (int g = 0; g < gpus; ++g) {
    const std::string_view name = cluster.gpu_model(static_cast<sim::GpuId>(g)).name;
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == name; });
    if (it == counts.end()) {
      counts.emplace_back(name, 1);
    } else {
      ++it->second;
    }
  }
  if (counts.size() == 1) return std::string(counts.front().first);
  std::string text = "mixed:";
  for (std::size_t i = 0; i < counts.size(); ++i) {
    text += fmt::format("{} {} {}", i == 0 ? "" : " +", counts[i].second, counts[i].first);
  }
  return text;
}

/// The scenario's cluster, with at least the plan's dp x tp x pp x ep GPUs.
std::shared_ptr<const topo::Cluster> plan_cluster(const Scenario& scenario, const Plan& plan,
                                                  const std::shared_ptr<const topo::Cluster>& prebuilt) {
  std::shared_ptr<const topo::Cluster> cluster = prebuilt;
  try {
    if (!cluster) {
      cluster = std::make_shared<const topo::Cluster>(topo::resolve_cluster(scenario.cluster.spec, scenario.cluster.gpus));
    }
  } catch (const sim::ConfigError& e) {
    throw sim::ConfigError(fmt::format("{}: /cluster: {}", scenario.path, e.what()));
  }
  const int ranks = static_cast<int>(plan.ranks());
  if (static_cast<std::size_t>(ranks) > cluster->gpu_count()) {
    throw sim::ConfigError(fmt::format("{}: plan {} = {} GPUs, but the cluster {} has {}", scenario.path,
                                       ranks_formula(plan), ranks, cluster->name(), cluster->gpu_count()));
  }
  return cluster;
}

/// The iteration time (the slowest rank's steady-state window), throughput and FLOP rates.
void report_timing(const SimulationOutput& out, const Plan& plan, const ComputeModel& compute, int ranks, int cc,
                   std::int64_t total_steps, Report& r) {
  // Steady state: the windows between consecutive step ends, after the first step.
  const auto& ends = out.compiled.step_end;
  const int steps = static_cast<int>(ends.size());
  const auto& graph = out.compiled.graph;
  std::vector<RankWindow> windows;
  const SteadyWindow steady = steady_window(plan, steps);
  for (sim::RankId rank = 0; rank < graph.ranks(); ++rank) {
    const sim::Time from = steps > 1 ? out.result.end[ends[static_cast<std::size_t>(steady.first)][rank]] : sim::Time::zero();
    windows.push_back(RankWindow{from, out.result.end[ends.back()[rank]], steady.count});
  }
  r.per_rank = breakdown(graph, out.result, windows);
  for (sim::RankId rank = 0; rank < graph.ranks(); ++rank) {
    r.per_rank[rank].gpu = static_cast<int>(graph.rank_gpu[rank]);
    r.per_rank[rank].represents = static_cast<int>(graph.represents(rank));
  }
  r.slowest_rank = 0;
  for (std::size_t i = 0; i < r.per_rank.size(); ++i) {
    if (r.per_rank[i].iteration_s > r.per_rank[static_cast<std::size_t>(r.slowest_rank)].iteration_s) {
      r.slowest_rank = static_cast<int>(i);
    }
  }
  r.breakdown = r.per_rank[static_cast<std::size_t>(r.slowest_rank)];
  r.iteration_time_s = r.breakdown.iteration_s;
  r.steps_total = total_steps;
  r.run_time_s = r.iteration_time_s * static_cast<double>(r.steps_total);
  r.samples_per_s = plan.global_batch / r.iteration_time_s;
  r.tokens_per_s = r.samples_per_s * out.model.seq_len;
  // Model FLOPs: forward + backward per sample as the layers count them (backward is twice forward,
  // less the stem's input gradient), without recomputation.
  const double step_flops = (out.model.fwd_flops() + out.model.bwd_flops()) * plan.global_batch;
  r.tflops_per_gpu = step_flops / r.iteration_time_s / ranks * 1e-12;
  const MathKind main_math = out.model.transformer ? MathKind::matmul : MathKind::conv;
  OpTemplate probe;
  probe.math = main_math;
  r.peak_tflops = compute.peak(instantiate(probe, 1, plan, cc).dtype).per_second() * 1e-12;
  if (!out.cluster->uniform_gpus(ranks)) {  // mixed GPUs: the mean peak of the GPUs used
    double sum = 0.0;
    for (int g = 0; g < ranks; ++g) {
      const topo::GpuSpec& spec = out.cluster->gpu_model(static_cast<sim::GpuId>(g));
      sum += ComputeModel(spec).peak(instantiate(probe, 1, plan, spec.compute_capability).dtype).per_second();
    }
    r.peak_tflops = sum / ranks * 1e-12;
  }
  r.mfu = r.tflops_per_gpu / r.peak_tflops;
  // Hardware FLOPs: every kernel of every simulated step, each rank's counted for the GPUs it
  // stands for, per step.
  double hardware_flops = 0.0;
  const auto add_flops = [&](std::uint32_t sig, sim::RankId rank) {
    if (sig < graph.signatures.size()) hardware_flops += graph.signatures[sig].flops * static_cast<double>(graph.represents(rank));
  };
  for (const sim::Node& n : graph.nodes) {
    if (n.kind != sim::OpKind::compute) continue;
    if (n.run == sim::kNoRun) {
      add_flops(n.signature, n.rank);
    } else {  // a coalesced node: each of its kernels
      for (std::uint32_t j = 0; j < graph.kernels(n); ++j) add_flops(graph.part_signature[graph.part(n, j)], n.rank);
    }
  }
  hardware_flops /= std::max(1, plan.steps);
  r.hardware_tflops_per_gpu = hardware_flops / r.iteration_time_s / ranks * 1e-12;
  r.hfu = r.hardware_tflops_per_gpu / r.peak_tflops;
}

/// Each simulated rank's peak memory against its GPU's capacity.
void report_memory(const SimulationOutput& out, const Plan& plan, Report& r) {
  const auto& cg = out.compiled;
  const auto& graph = cg.graph;
  // Dispatch and combine buffers: a micro-batch's routed tokens sent and received, h each (the
  // combine reuses them), scaled by the most loaded rank's share. Under sequence parallelism a
  // TP rank sends its 1/tp of them, and receives its expert-TP group's gathered: expert TP / tp
  // (1/tp with whole experts).
  const bool sp = plan.tp > 1 && plan.sequence_parallel;
  const double sent_share = sp ? 1.0 / plan.tp : 1.0;
  const double received_share = sp ? static_cast<double>(plan.etp()) / plan.tp : 1.0;
  double token_buffers = 0.0;
  if (!r.expert_loads.empty()) {
    double top_k = 0.0, mean = 0.0, most = 0.0;
    for (const Layer& l : out.model.layers) top_k = std::max(top_k, static_cast<double>(l.top_k));
    for (const ExpertLoad& l : r.expert_loads) {
      mean += l.tokens / static_cast<double>(r.expert_loads.size());
      most = std::max(most, l.tokens);
    }
    token_buffers = (sent_share + received_share * (mean > 0.0 ? most / mean : 1.0)) * plan.micro_batch *
                    out.model.seq_len * top_k * out.model.transformer->hidden * activation_bytes(plan.precision);
  }
  for (int rank = 0; rank < static_cast<int>(graph.ranks()); ++rank) {
    MemoryBreakdown mem;
    if (plan.pp > 1) {
      const auto ri = static_cast<std::size_t>(rank);
      double params = 0.0;
      double expert_params = 0.0;
      for (const auto& [first, last] : cg.rank_chunks[ri]) {
        params += tp_rank_params(out.model, plan.tp, first, last, plan.ep, plan.etp());
        expert_params += tp_rank_expert_params(out.model, plan.tp, first, last, plan.ep, plan.etp());
      }
      params += tp_tied_copy_params(out.model, plan.tp, cg.rank_chunks[ri]);
      mem = pipeline_rank_memory(params, plan, cg.rank_activation_peak_bytes[ri], cg.rank_in_flight[ri], expert_params);
    } else {
      mem = data_parallel_memory(out.model, plan);
    }
    mem.buffers += token_buffers;
    RankMemory m;
    m.rank = rank;
    m.bytes = mem;
    m.gpu = static_cast<int>(graph.rank_gpu[static_cast<std::size_t>(rank)]);
    m.represents = static_cast<int>(graph.represents(static_cast<sim::RankId>(rank)));
    m.capacity = out.cluster->gpu_model(graph.rank_gpu[static_cast<std::size_t>(rank)]).memory.as_double();
    m.oom = mem.total() > m.capacity;
    m.overflow = std::max(0.0, mem.total() - m.capacity);
    r.memory.push_back(m);
  }
}

/// A pipeline's stages: the layers, units, parameters and modelled time of each chunk.
void report_stages(const SimulationOutput& out, const Plan& plan, const ComputeModel& compute, int cc, Report& r) {
  const auto& cg = out.compiled;
  r.schedule = std::string(to_string(plan.schedule));
  for (int st = 0; st < plan.pp; ++st) {
    StageReport sr;
    sr.stage = st;
    const auto stage_rank = static_cast<std::size_t>(cg.stage_ranks[static_cast<std::size_t>(st)]);  // replica 0, TP rank 0
    sr.rank = static_cast<int>(stage_rank);
    sr.in_flight = cg.rank_in_flight[stage_rank];
    // A copy of the tied word embedding, where the stage runs the LM head without it.
    const bool tied_copy = tp_tied_copy_params(out.model, 1, cg.rank_chunks[stage_rank]) > 0.0;
    for (const auto& [first, last] : cg.rank_chunks[stage_rank]) {
      StageReport::Chunk c;
      c.first_layer = out.model.layers[first].name;
      c.last_layer = out.model.layers[last - 1].name;
      for (const PartitionUnit& u : partition_units(out.model)) c.units += (u.first >= first && u.last <= last) ? 1 : 0;
      for (std::size_t i = first; i < last; ++i) {
        c.modelled_s += layer_seconds(out.model, i, plan, compute, cc);
        c.params += out.model.layers[i].params + (tied_copy ? out.model.layers[i].tied_params : 0);
      }
      sr.chunks.push_back(c);
    }
    r.stages.push_back(sr);
  }
}

}  // namespace

namespace {

/// Compiles `plan` for `out`'s model and cluster into out.compiled; strategy errors name `path`.
void compile_plan(SimulationOutput& out, const Plan& scenario_plan, const std::string& path, const ComputeModel& compute,
                  const SimulationInputs& inputs) {
  // The kernel generation scales the matrix kernels as gemm_efficiency does; the reported plan
  // keeps both as the scenario gave them.
  Plan plan = scenario_plan;
  if (plan.kernel_generation == KernelGeneration::megatron_2021) {
    if (!(inputs.megatron_2021_gemm_efficiency > 0.0)) {
      throw sim::ConfigError(fmt::format("{}: /plan/kernel_generation: megatron-2021 needs the calibration file's "
                                         "megatron_sc21.gemm_efficiency, and none was loaded",
                                         path));
    }
    plan.gemm_efficiency *= inputs.megatron_2021_gemm_efficiency;
  }
  // A timeline draws every kernel: coalesce only without one.
  const CompileOptions options{inputs.coalesce_kernels && inputs.link_sample_interval <= sim::Time::zero()};
  try {
    out.compiled = plan.pp > 1 ? compile_pipeline(out.model, plan, *out.cluster, compute, options)
                               : compile_data_parallel(out.model, plan, *out.cluster, compute, options);
  } catch (const sim::ConfigError& e) {
    throw sim::ConfigError(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace

std::array<double, sim::kOpTypeCount> plan_comm_slowdowns(const Plan& plan, const topo::GpuSpec& gpu) {
  if (plan.comm_contention == CommContention::off) return {};
  return comm_slowdown_by_type(compute_constants(gpu));
}

std::array<bool, sim::kOpTypeCount> plan_comm_waits(const Plan& plan, const topo::GpuSpec& gpu) {
  if (plan.comm_contention == CommContention::off) return {};
  return comm_waits_by_type(compute_constants(gpu));
}

namespace {

/// Per graph rank, `of` its GPU model; empty when every rank's GPU is of one model.
template <typename T, typename F>
std::vector<T> by_rank(const topo::Cluster& cluster, const sim::ExecutionGraph& graph, F of) {
  std::vector<T> out;
  bool differs = false;
  for (const sim::GpuId g : graph.rank_gpu) {
    out.push_back(of(cluster.gpu_model(g)));
    differs = differs || out.back() != out.front();
  }
  if (!differs) out.clear();
  return out;
}

}  // namespace

std::vector<std::array<double, sim::kOpTypeCount>> plan_comm_slowdowns_by_rank(const Plan& plan, const topo::Cluster& cluster,
                                                                            const sim::ExecutionGraph& graph) {
  return by_rank<std::array<double, sim::kOpTypeCount>>(cluster, graph,
                                                        [&](const topo::GpuSpec& gpu) { return plan_comm_slowdowns(plan, gpu); });
}

std::vector<std::array<bool, sim::kOpTypeCount>> plan_comm_waits_by_rank(const Plan& plan, const topo::Cluster& cluster,
                                                                      const sim::ExecutionGraph& graph) {
  return by_rank<std::array<bool, sim::kOpTypeCount>>(cluster, graph,
                                                      [&](const topo::GpuSpec& gpu) { return plan_comm_waits(plan, gpu); });
}

SimulationOutput compile_scenario(const Scenario& scenario, const SimulationInputs& inputs) {
  SimulationOutput out;
  out.model = plan_model(scenario, scenario.plan);
  out.cluster = plan_cluster(scenario, scenario.plan, inputs.cluster);
  if (scenario.plan.fp8) {
    const int ranks = static_cast<int>(scenario.plan.ranks());
    for (int g = 0; g < ranks; ++g) {
      const topo::GpuSpec& spec = out.cluster->gpu_model(static_cast<sim::GpuId>(g));
      if (spec.fp8.per_second() <= 0.0) {
        throw sim::ConfigError(fmt::format("{}: /plan/fp8: expected GPUs with FP8 tensor cores (H100 and later), "
                                           "found {} (GPU {})",
                                           scenario.path, spec.name, g));
      }
    }
  }
  compile_plan(out, scenario.plan, scenario.path, ComputeModel(out.cluster->gpu_model(0), inputs.profiles), inputs);
  report_memory(out, scenario.plan, out.report);
  return out;
}

SimulationOutput simulate_scenario(const Scenario& scenario, const SimulationInputs& inputs) {
  return simulate_compiled(compile_scenario(scenario, inputs), scenario, inputs);
}

SimulationOutput simulate_compiled(SimulationOutput out, const Scenario& scenario, const SimulationInputs& inputs) {
  if (out.compiled.bounds_only) {
    throw sim::InternalError("simulate: a graph folded as if every placement were alike (plan.fold_as_alike) bounds a "
                             "plan but does not simulate it");
  }
  out.report = Report{};  // the memory is reported after the run, with the MoE loads it depends on
  Plan plan = scenario.plan;
  const topo::Cluster& cluster = *out.cluster;
  const int ranks = static_cast<int>(plan.ranks());
  const topo::GpuSpec& gpu = cluster.gpu_model(0);
  const ComputeModel compute(gpu, inputs.profiles);
  sim::ExecutorOptions options;
  options.comm_compute_slowdown = plan.comm_compute_slowdown;
  options.comm_compute_slowdown_by_type = plan_comm_slowdowns(plan, gpu);
  options.comm_waits_for = plan_comm_waits(plan, gpu);
  options.closed_form = inputs.closed_form;
  // Timelines show every node's wait; reports need only receives'.
  options.ready_times = inputs.link_sample_interval > sim::Time::zero();
  if (inputs.link_sample_interval > sim::Time::zero()) {
    out.sampled_links = links_to_sample(cluster, ranks);
    options.sample_links = out.sampled_links;
    options.sample_interval = inputs.link_sample_interval;
  }
  const auto run = [&] {
    // A mixed cluster: each rank slows under communication as its own GPU model does.
    options.comm_compute_slowdown_by_rank = plan_comm_slowdowns_by_rank(plan, cluster, out.compiled.graph);
    options.comm_waits_for_by_rank = plan_comm_waits_by_rank(plan, cluster, out.compiled.graph);
    if (out.index) {
      out.result = sim::execute(out.compiled.graph, std::move(*out.index), cluster, inputs.collectives, plan.network, options);
      out.index.reset();
    } else {
      out.result = sim::execute(out.compiled.graph, cluster, inputs.collectives, plan.network, options);
    }
  };
  run();
  if (plan.settle && !settled(out.compiled, out.result)) {
    plan.steps = std::max(plan.steps, kUnsettledSteps);
    compile_plan(out, plan, scenario.path, compute, inputs);
    run();
  }
  plan.settle = false;
  out.plan = plan_to_json(plan);

  Report& r = out.report;
  r.scenario = scenario.path;
  r.model = out.model.name;
  r.model_params = out.model.params();
  r.model_fwd_flops = out.model.fwd_flops();
  r.cluster = cluster.name();
  r.gpu = gpu_models_text(cluster, ranks);
  r.gpus = ranks;
  std::vector<int> nodes;
  for (int g = 0; g < ranks; ++g) nodes.push_back(cluster.gpu(static_cast<sim::GpuId>(g)).node);
  std::sort(nodes.begin(), nodes.end());
  r.nodes = static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
  r.plan_summary = plan_summary(plan, gpu.compute_capability);
  if (const int unfused = unfused_softmax_layers(out.model); unfused > 0) {
    r.plan_summary += fmt::format(" (PyTorch's attention softmax in {} layer{}: Megatron's kernel does not take "
                                  "these scores)",
                                  unfused, unfused > 1 ? "s" : "");
  }
  r.folding = out.compiled.folding;
  r.simulated_ranks = static_cast<int>(out.compiled.graph.ranks());
  r.folding_uneven = out.result.folded_uneven;
  r.folding_spread_s = out.result.folded_spread.seconds();
  const std::int64_t tokens_per_step = static_cast<std::int64_t>(plan.global_batch) * std::max(0, out.model.seq_len);
  report_timing(out, plan, compute, ranks, gpu.compute_capability, scenario.total_steps(tokens_per_step), r);
  if (scenario.measured.present) {
    const Measured& m = scenario.measured;
    r.measured.present = true;
    r.measured.whole_run = m.run_s > 0.0;
    r.measured.measured_s = r.measured.whole_run ? m.run_s : m.iteration_s;
    r.measured.predicted_s = r.measured.whole_run ? r.run_time_s : r.iteration_time_s;
    r.measured.role = m.role == MeasuredRole::calibration ? "calibration" : "prediction";
    r.measured.source = m.source;
  }
  if (auto routing = moe_routing(out.model, plan)) report_expert_loads(out, plan, *routing, r);
  report_memory(out, plan, r);
  if (plan.pp > 1) report_stages(out, plan, compute, gpu.compute_capability, r);
  r.kernels = out.compiled.graph.signatures.size();
  for (const auto& sig : out.compiled.graph.signatures) r.kernels_profiled += compute.profiled(sig) ? 1 : 0;
  r.gradient_buckets = plan.replicas() > 1 ? out.compiled.buckets.size() : 0;
  r.events = out.result.events;
  r.fingerprint = out.result.fingerprint;
  if (inputs.prices != nullptr) add_costs(r, cluster, *inputs.prices);
  return out;
}

}  // namespace foresight::strategy
