#include "run/scenario.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <limits>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "models/model_zoo.hpp"
#include "topologies/cluster_builders.hpp"
#include "common/json_reader.hpp"
#include "run/params.hpp"

namespace foresight::strategy {
namespace {

using nlohmann::json;
using topo::JsonPath;
using topo::JsonReader;

/// The most ranks (dp x tp x pp x ep) and samples per step a plan may have: each factor's own
/// bound (run/params.cpp's kMaxRanks), kept by their products, which are ints.
constexpr double kMaxPlanProduct = 1 << 30;

/// The plan key whose value counts GPUs beside dp, pp, ep and cp: expert_tp where given (with
/// expert_tp below tp the TP ranks are EP ranks too: GPUs = dp x expert_tp x pp x ep x cp), else tp.
const char* tp_rank_key(const json& plan) { return plan.contains("expert_tp") ? "expert_tp" : "tp"; }

std::string resolve_path(const std::string& origin, const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
  const auto base = std::filesystem::path(origin).parent_path();
  return base.empty() ? p : (base / p).string();
}

/// The index of `obj[key]` among the table's choices for plan.`key`, as enum E.
template <typename E>
E pick(const JsonReader& r, const json& obj, std::string_view section, std::string_view key, const JsonPath& p,
       std::string_view what) {
  return static_cast<E>(std::get<long long>(read_value(r, obj, p, *find_param(section, key), what)));
}

/// The pipeline fields of a plan, checked against each other (the model-dependent checks, such as
/// more stages than layers, come when the model is partitioned).
void read_pipeline(const JsonReader& r, const json& o, const JsonPath& p, Plan& plan) {
  auto has = [&](std::string_view k) { return o.contains(k); };
  if (plan.pp > 1 && plan.schedule == Schedule::none) plan.schedule = Schedule::one_f_one_b;
  if (plan.pp == 1 && plan.schedule != Schedule::none) {
    r.fail(p.at("schedule"), fmt::format("expected \"none\" with pp = 1: schedule \"{}\" needs pp > 1",
                                         to_string(plan.schedule)));
  }
  if (plan.virtual_stages > 1 && plan.schedule != Schedule::interleaved) {
    r.fail(p.at("virtual_stages"), fmt::format("expected 1: {} virtual stages need schedule \"interleaved\", found \"{}\"",
                                               plan.virtual_stages, to_string(plan.schedule)));
  }
  if (plan.schedule == Schedule::interleaved && plan.grad_accum % plan.pp != 0 && !has("global_batch")) {
    r.fail(p.at("grad_accum"), fmt::format("expected a multiple of pp = {}: the interleaved schedule runs micro-batches "
                                           "in groups of pp (Megatron), found {}", plan.pp, plan.grad_accum));
  }
  if (has("partition")) {
    const json& v = o.at("partition");
    if (v.is_array()) {
      plan.partition = PartitionMode::explicit_units;
      const JsonPath pp = p.at("partition");
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_number_integer() || v[i].get<long long>() < 1) {
          r.fail(pp.at(i), fmt::format("expected a count of units >= 1, found {}", topo::shown(v[i])));
        }
        plan.partition_units.push_back(static_cast<int>(std::min<long long>(v[i].get<long long>(), 1 << 24)));
      }
      if (plan.partition_units.empty()) r.fail(pp, "expected a list of units per stage, found an empty list");
    } else {
      plan.partition = pick<PartitionMode>(r, o, "plan", "partition", p, "a plan");
    }
  } else if (plan.schedule == Schedule::interleaved) {
    plan.partition = PartitionMode::uniform;  // Megatron's equal split into model chunks
  }
  if (plan.dispatch_gil > plan.dispatch_forward) {
    r.fail(p.at("dispatch_gil"), fmt::format("expected at most dispatch_forward ({}), found {}",
                                             sim::to_string(plan.dispatch_forward), sim::to_string(plan.dispatch_gil)));
  }
  if (plan.pipeline_engine == PipelineEngine::deepspeed) {
    const JsonPath at = p.at("pipeline_engine");
    if (plan.pp == 1) r.fail(at, "expected megatron with pp = 1: DeepSpeed's pipeline engine needs pp > 1");
    if (plan.schedule != Schedule::one_f_one_b) {
      r.fail(p.at("schedule"), fmt::format("expected 1f1b with pipeline_engine deepspeed (its TrainSchedule), found \"{}\"",
                                           to_string(plan.schedule)));
    }
    if (plan.driver != PipelineDriver::per_stage) {
      r.fail(p.at("driver"), "expected per_stage with pipeline_engine deepspeed: one process per stage");
    }
    if (has("p2p_sync")) {
      r.fail(p.at("p2p_sync"), "expected no p2p_sync with pipeline_engine deepspeed: its exchanges block the compute "
                               "stream, and the host where tensor parallelism partitions them");
    }
    if (plan.sequence_parallel) {
      r.fail(p.at("sequence_parallel"), "expected false with pipeline_engine deepspeed: its engine partitions the "
                                        "exchanged tensors over the tensor-parallel ranks itself");
    }
    if (plan.ep > 1) {
      r.fail(p.at("ep"), fmt::format("expected 1 with pipeline_engine deepspeed: DeepSpeed-MoE under its pipeline engine "
                                     "is not modelled, found {}", plan.ep));
    }
    plan.p2p_sync = false;
  } else if (!has("p2p_sync")) {
    plan.p2p_sync = plan.driver == PipelineDriver::per_stage && plan.schedule != Schedule::interleaved;
  }
  // The default goes with any plan, as the effective plan echoes it.
  if (has("fp8_recipe") && !plan.fp8 && plan.fp8_recipe != Fp8Recipe::delayed) {
    r.fail(p.at("fp8_recipe"), "expected delayed without fp8 true: it is how FP8 tensors are scaled, found current");
  }
  if (has("recompute_modules")) {
    const JsonPath mp = p.at("recompute_modules");
    const json& names = r.array_at(o, "recompute_modules", p, "a plan");
    plan.recompute_modules = 0;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::string name = names[i].is_string() ? names[i].get<std::string>() : "";
      const auto it = std::find_if(kRecomputeModules.begin(), kRecomputeModules.end(),
                                   [&](const auto& m) { return m.first == name; });
      if (it == kRecomputeModules.end()) {
        r.fail(mp.at(i), fmt::format("expected core_attn, moe_act, layernorm, mlp, moe or shared_experts "
                                     "(Megatron-Core's mla_up_proj is not modelled: no MLA), found {}",
                                     topo::shown(names[i])));
      }
      plan.recompute_modules |= it->second;
    }
    // Megatron-Core's default (the attention core) goes with any recompute, as the effective
    // plan echoes it; others are what selective recompute reruns.
    if (plan.recompute != Recompute::selective && plan.recompute_modules != kRecomputeCoreAttn) {
      r.fail(mp, fmt::format("expected recompute selective with modules other than [\"core_attn\"]: they are what "
                             "selective recompute reruns, found recompute {}", to_string(plan.recompute)));
    }
  }
  if (plan.recompute == Recompute::except_last && plan.pp == 1) {
    r.fail(p.at("recompute"), "expected none, full, selective or selective_op with pp = 1: except_last is torchgpipe's per-stage "
                              "checkpointing");
  }
  // A pipeline may need more steps to settle than data parallelism: 3, or 8 with the last 4
  // measured when the last two of 3 differ (simulation.cpp). PipeDream never flushes: always 8.
  if (plan.pp > 1 && !has("steps")) {
    plan.steps = plan.schedule == Schedule::pipedream ? kUnsettledSteps : 3;
    plan.settle = plan.schedule != Schedule::pipedream;
  }
  if (plan.schedule == Schedule::naive && plan.grad_accum != 1 && !has("global_batch")) {
    r.fail(p.at("grad_accum"), fmt::format("expected 1: naive model parallelism runs one micro-batch per step, found {} "
                                           "(use schedule \"gpipe\" for several)", plan.grad_accum));
  }
}

/// plan.moe_routing: {"distribution": balanced | zipf | histogram, "s", "file", "seed",
/// "expected"}. A histogram file is {"source", "shares": [...] or [[...], ...]}.
RoutingSpec read_routing(const JsonReader& r, const json& o, const JsonPath& p, const std::string& origin) {
  r.check_object(o, section_keys("plan.moe_routing"), p, "moe_routing");
  RoutingSpec spec;
  auto value = [&](std::string_view key) { return read_value(r, o, p, *find_param("plan.moe_routing", key), "moe_routing"); };
  if (o.contains("distribution")) spec.kind = static_cast<RoutingSpec::Kind>(std::get<long long>(value("distribution")));
  if (o.contains("s")) {
    if (spec.kind != RoutingSpec::Kind::zipf) r.fail(p.at("s"), "expected no s: it is the zipf distribution's exponent");
    spec.zipf_s = std::get<double>(value("s"));
  }
  if (o.contains("seed")) spec.seed = static_cast<std::uint64_t>(std::get<long long>(value("seed")));
  if (o.contains("expected")) spec.expected = std::get<bool>(value("expected"));
  if (spec.kind == RoutingSpec::Kind::histogram) {
    spec.histogram_file = resolve_path(origin, std::get<std::string>(value("file")));
    const JsonReader f(spec.histogram_file, sim::ErrorKind::config);
    const json doc = f.parse_file();
    const JsonPath root;
    f.check_object(doc, {"source", "shares"}, root, "a routing histogram");
    f.string_at(doc, "source", root, "a routing histogram");
    const json& shares = f.array_at(doc, "shares", root, "a routing histogram");
    auto row_of = [&](const json& a, const JsonPath& at) {
      if (!a.is_array() || a.empty()) f.fail(at, fmt::format("expected a non-empty list of per-expert shares, found {}", topo::shown(a)));
      std::vector<double> row;
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (!a[i].is_number() || !(a[i].get<double>() >= 0.0)) {
          f.fail(at.at(i), fmt::format("expected a share >= 0, found {}", topo::shown(a[i])));
        }
        row.push_back(a[i].get<double>());
      }
      return row;
    };
    if (!shares.empty() && shares[0].is_array()) {
      for (std::size_t i = 0; i < shares.size(); ++i) spec.histogram.push_back(row_of(shares[i], root.at("shares").at(i)));
    } else {
      spec.histogram.push_back(row_of(shares, root.at("shares")));
    }
  } else if (o.contains("file")) {
    r.fail(p.at("file"), "expected no file: it is the histogram distribution's");
  }
  return spec;
}

/// plan.stragglers: {"gpus": [...], "slowdown", "jitter", "seed"}.
void read_stragglers(const JsonReader& r, const json& o, const JsonPath& p, Plan& plan) {
  Scenario read;
  read.plan = plan;
  read_section(r, o, p, "plan.stragglers", "stragglers", read);
  plan = std::move(read.plan);
  if (o.contains("gpus")) {
    const json& gpus = r.array_at(o, "gpus", p, "stragglers");
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      if (!gpus[i].is_number_integer() || gpus[i].get<long long>() < 0 || gpus[i].get<long long>() >= (1 << 24)) {
        r.fail(p.at("gpus").at(i), fmt::format("expected a GPU index >= 0, found {}", topo::shown(gpus[i])));
      }
      plan.straggler_gpus.push_back(static_cast<int>(gpus[i].get<long long>()));
    }
  }
  if (plan.straggler_slowdown != 1.0 && plan.straggler_gpus.empty()) {
    r.fail(p.at("slowdown"), "expected gpus with it: the slowdown applies to the GPUs listed in gpus");
  }
}

/// Context parallelism: what it combines with (Megatron-Core's ring attention through Transformer
/// Engine), and its placement (tp-cp-dp-pp: CP ranks next to TP ranks, inside a node when they fit).
void read_context_parallel(const JsonReader& r, const json& o, const JsonPath& p, Plan& plan) {
  if (plan.cp == 1) {
    if (plan.cp_comm != CpComm::p2p) r.fail(p.at("cp_comm"), "expected p2p (the default) without cp > 1: it says how cp ranks exchange");
    return;
  }
  const JsonPath at = p.at("cp");
  const auto refuse = [&](std::string_view why) { r.fail(at, fmt::format("expected 1 {}, found {}", why, plan.cp)); };
  if (!plan.fused_attention) {
    refuse("without fused_attention: context parallelism is Transformer Engine's fused attention over a ring");
  }
  if (plan.kernels != Kernels::fused) refuse("with eager kernels: context parallelism is Megatron-Core's");
  if (plan.framework != Framework::ddp) refuse("with Horovod: context parallelism is Megatron-Core's");
  if (plan.shard_group > 0) refuse("with shard_group: hybrid sharding is not simulated with it");
  if (plan.ep > 1) refuse(fmt::format("with ep = {}: experts with context parallelism are not simulated", plan.ep));
  if (plan.recompute == Recompute::selective_op) refuse("with selective_op recompute (torchtitan's)");
  if (plan.pipeline_engine == PipelineEngine::deepspeed) refuse("with DeepSpeed's pipeline engine");
  if (plan.driver == PipelineDriver::single_process) refuse("with a single-process pipeline driver");
  if (!o.contains("placement")) plan.placement = "tp-dp-pp";
}

/// The DataLoader fields of a plan, checked against each other and against input_rate.
void read_input(const JsonReader& r, const json& o, const JsonPath& p, Plan& plan) {
  if (plan.input_workers == 0) {
    // Their defaults are allowed (an echoed plan states every key); anything else would be ignored.
    const Plan defaults;
    const std::pair<const char*, bool> set[] = {{"input_sample_time", plan.input_sample_time != defaults.input_sample_time},
                                                {"input_prefetch", plan.input_prefetch != defaults.input_prefetch},
                                                {"input_cores", plan.input_cores != defaults.input_cores}};
    for (const auto& [key, differs] : set) {
      if (differs) {
        r.fail(p.at(key), fmt::format("expected no {} without input_workers: it describes the DataLoader's workers, "
                                      "found {}",
                                      key, topo::shown(o.at(key))));
      }
    }
    return;
  }
  if (plan.input_rate > 0.0) {
    r.fail(p.at("input_workers"), fmt::format("expected 0 with input_rate ({} samples/s): the input is either a rate "
                                              "or a pool of workers, found {} workers",
                                              plan.input_rate, plan.input_workers));
  }
  if (plan.input_sample_time <= sim::Time{}) {
    r.fail(p.at("input_sample_time"), fmt::format("expected a CPU time per sample above 0 with {} input_workers, found {}",
                                                  plan.input_workers, o.contains("input_sample_time")
                                                                          ? sim::to_string(plan.input_sample_time)
                                                                          : std::string("none")));
  }
  // The steady state repeats every input_workers steps (RankEmitter::load_batches): at least one
  // such window after the first step, after a pipeline's settling half.
  const int window = plan.input_workers + 1;
  plan.steps = std::max(plan.steps, plan.pp > 1 ? 2 * window : window);
}

Plan read_plan(const JsonReader& r, const json& o, const JsonPath& p, const std::string& origin) {
  Scenario read;
  read_section(r, o, p, "plan", "a plan", read);
  if (o.contains("stragglers")) read_stragglers(r, o.at("stragglers"), p.at("stragglers"), read.plan);
  Plan plan = std::move(read.plan);
  auto has = [&](std::string_view k) { return o.contains(k); };
  // Each axis is at most kMaxPlanProduct; so must their product be, which is an int everywhere
  // (dp x tp x pp x ep of 2^30 x 4 overflowed: issue 25).
  const double ranks = static_cast<double>(plan.dp) * plan.tp * plan.pp * plan.ep * plan.cp;
  if (ranks > kMaxPlanProduct) {
    r.fail(p, fmt::format("expected dp x tp x pp x ep x cp at most {} ranks, found {} x {} x {} x {} x {} = {}",
                          kMaxPlanProduct, plan.dp, plan.tp, plan.pp, plan.ep, plan.cp, ranks));
  }
  read_context_parallel(r, o, p, plan);
  read_pipeline(r, o, p, plan);
  read_input(r, o, p, plan);
  if (plan.shard_group > 0) {
    if (plan.zero == 0) {
      r.fail(p.at("shard_group"), fmt::format("expected no shard_group without ZeRO (zero 1-3): it says how ZeRO "
                                              "shards, found {}", plan.shard_group));
    }
    if (plan.pp > 1) {
      r.fail(p.at("shard_group"), fmt::format("expected no shard_group with pp = {}: hybrid sharding is simulated for "
                                              "data parallelism, found {}", plan.pp, plan.shard_group));
    }
  }
  if (plan.zero > 1 && plan.pp > 1) {
    // DeepSpeed refuses ZeRO-2/3 with pipeline parallelism (gradient partitioning needs every
    // micro-batch's gradients reduced, which the pipeline's accumulation defeats); Megatron's
    // distributed optimizer is ZeRO-1.
    r.fail(p.at("zero"), fmt::format("expected 0 or 1 with pp = {}: ZeRO-2 and ZeRO-3 do not combine with pipeline "
                                     "parallelism (DeepSpeed rejects them; Megatron's distributed optimizer is "
                                     "ZeRO-1), found {}",
                                     plan.pp, plan.zero));
  }
  if (plan.gradient_groups > 0 && plan.framework != Framework::horovod) {
    r.fail(p.at("gradient_groups"), fmt::format("expected 0 with framework {}: explicit gradient groups are Horovod's "
                                                "(DDP has its buckets), found {}",
                                                to_string(plan.framework), plan.gradient_groups));
  }
  if (plan.zero > 0 && plan.framework != Framework::ddp) {
    r.fail(p.at("zero"), fmt::format("expected 0 with framework {}: ZeRO shards a PyTorch/DeepSpeed data-parallel group, "
                                     "found {}",
                                     to_string(plan.framework), plan.zero));
  }
  if (plan.ep > 1 && plan.zero > 1) {
    r.fail(p.at("ep"), fmt::format("expected 1 with ZeRO-{}: sharding expert gradients or weights is not simulated "
                                   "(ZeRO-1, Megatron's distributed optimizer, shards expert states), found {}",
                                   plan.zero, plan.ep));
  }
  if (plan.ep > 1 && plan.zero > 0 && plan.shard_group > 0) {
    r.fail(p.at("shard_group"), fmt::format("expected none with ep = {}: hybrid sharding of expert states is not "
                                            "simulated, found {}",
                                            plan.ep, plan.shard_group));
  }
  if (has("expert_tp") && plan.expert_tp != plan.tp) {
    if (plan.expert_tp > plan.tp || plan.tp % plan.expert_tp != 0) {
      r.fail(p.at("expert_tp"), fmt::format("expected a divisor of tp = {} (experts split over part of each TP group, "
                                            "or whole at 1), found {}", plan.tp, plan.expert_tp));
    }
    const int across = plan.tp / plan.expert_tp;  // TP ranks each expert-TP group's EP group spans
    if (plan.ep == 1) {
      r.fail(p.at("expert_tp"), fmt::format("expected tp ({}) with ep = 1: experts split over fewer ranks than TP need "
                                            "expert parallelism, an EP group over the TP ranks, found {}",
                                            plan.tp, plan.expert_tp));
    }
    if (plan.ep % across != 0) {
      r.fail(p.at("ep"), fmt::format("expected a multiple of tp / expert_tp = {} / {} = {}: an EP group spans whole "
                                     "tensor-parallel groups, found {}", plan.tp, plan.expert_tp, across, plan.ep));
    }
    if (!plan.sequence_parallel) {
      r.fail(p.at("sequence_parallel"), fmt::format("expected true with expert_tp {} and tp = {}: Megatron-Core's MoE "
                                                    "layer under tensor parallelism needs it (each TP rank routes its "
                                                    "share of the sequence)", plan.expert_tp, plan.tp));
    }
  }
  // Megatron-Core's order puts EP groups right after TP (tp-cp-ep-dp-pp), so they stay inside
  // a node when they fit: data-parallel replicas before pipeline stages.
  if (plan.ep > 1 && !has("placement")) plan.placement = "tp-dp-pp";
  if (has("moe_routing")) plan.routing = read_routing(r, o.at("moe_routing"), p.at("moe_routing"), origin);

  if (has("placement")) {
    plan.placement = std::get<std::string>(read_value(r, o, p, *find_param("plan", "placement"), "a plan"));
    std::vector<std::string> dims;
    for (std::size_t k = 0; k < plan.placement.size(); k += 3) dims.push_back(plan.placement.substr(k, 2));
    std::sort(dims.begin(), dims.end());
    if (plan.placement.size() != 8 || plan.placement[2] != '-' || plan.placement[5] != '-' ||
        dims != std::vector<std::string>{"dp", "pp", "tp"}) {
      r.fail(p.at("placement"), fmt::format("expected tp, pp and dp in some order, innermost first, joined by '-' "
                                            "(e.g. \"tp-pp-dp\"), found \"{}\"", plan.placement));
    }
  }
  if (plan.sequence_parallel && plan.tp == 1) {
    r.fail(p.at("sequence_parallel"), "expected false with tp = 1: sequence parallelism splits a tensor-parallel group's "
                                      "norms and dropout");
  }
  if (plan.tp_comm_overlap && !plan.sequence_parallel) {
    r.fail(p.at("tp_comm_overlap"), "expected false without sequence_parallel: Transformer Engine overlaps the "
                                    "sequence-parallel all-gathers and reduce-scatters");
  }
  if (plan.shard_group > 0 && (plan.shard_group > plan.dp || plan.dp % plan.shard_group != 0)) {
    r.fail(p.at("shard_group"), fmt::format("expected a divisor of dp = {} (shard groups tile the data-parallel "
                                            "group), found {}", plan.dp, plan.shard_group));
  }
  // Batch arithmetic: global = dp x micro x accum.
  if (plan.global_batch > 0) {
    const long long per_step = static_cast<long long>(plan.sample_replicas()) * plan.micro_batch;
    if (plan.global_batch % per_step != 0) {
      r.fail(p.at("global_batch"), fmt::format("expected a multiple of dp{} x micro_batch = {} x {} = {}, found {}",
                                               ep_factor(plan), plan.sample_replicas(), plan.micro_batch, per_step,
                                               plan.global_batch));
    }
    const long long accum = plan.global_batch / per_step;
    if (has("grad_accum") && accum != plan.grad_accum) {
      r.fail(p.at("grad_accum"), fmt::format("expected {} (global_batch {} / (dp {} x micro_batch {})), found {}",
                                             accum, plan.global_batch, plan.dp, plan.micro_batch, plan.grad_accum));
    }
    plan.grad_accum = static_cast<int>(accum);
  } else {
    // global_batch's own bound holds for the one derived (2^30 x 2^30 overflowed: issue 25).
    const double samples = static_cast<double>(plan.sample_replicas()) * plan.micro_batch * plan.grad_accum;
    if (samples > kMaxPlanProduct) {
      r.fail(p, fmt::format("expected a global batch dp{} x micro_batch x grad_accum of at most {} samples, found "
                            "{} x {} x {} = {}", ep_factor(plan), kMaxPlanProduct, plan.sample_replicas(),
                            plan.micro_batch, plan.grad_accum, samples));
    }
    plan.global_batch = plan.sample_replicas() * plan.micro_batch * plan.grad_accum;
  }
  if (has("global_batch") && plan.schedule == Schedule::naive && plan.grad_accum != 1) {
    r.fail(p.at("global_batch"), fmt::format("expected dp x micro_batch = {}: naive model parallelism runs one "
                                             "micro-batch per step, found {}", plan.dp * plan.micro_batch, plan.global_batch));
  }
  if (has("global_batch") && plan.schedule == Schedule::interleaved && plan.grad_accum % plan.pp != 0) {
    r.fail(p.at("global_batch"), fmt::format("expected micro-batches per step (global_batch / (dp x micro_batch) = {}) "
                                             "to be a multiple of pp = {} for the interleaved schedule",
                                             plan.grad_accum, plan.pp));
  }
  return plan;
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    const auto dot = path.find('.', start);
    parts.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

}  // namespace

std::int64_t Scenario::total_steps(std::int64_t tokens_per_step) const {
  if (workload.steps > 0) return workload.steps;
  if (workload.tokens > 0) {
    if (tokens_per_step <= 0) {
      throw sim::ConfigError(fmt::format("{}: /workload/tokens: expected a model with a sequence length (a "
                                         "transformer) to count steps in tokens; give \"steps\" instead",
                                         path));
    }
    return (workload.tokens + tokens_per_step - 1) / tokens_per_step;
  }
  const std::int64_t per_epoch = (workload.dataset_samples + plan.global_batch - 1) / plan.global_batch;
  // 2^24 epochs of 2^40 steps overflowed int64 (issue 25).
  if (per_epoch > std::numeric_limits<std::int64_t>::max() / std::max(1, workload.epochs)) {
    throw sim::ConfigError(fmt::format("{}: /workload: expected at most 2^63 - 1 steps, found {} epochs x {} steps", path,
                                       workload.epochs, per_epoch));
  }
  return static_cast<std::int64_t>(workload.epochs) * per_epoch;
}

Override parse_override(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 > text.size()) {
    throw sim::ConfigError(fmt::format("--set: expected PATH=VALUE such as plan.tp=8, found \"{}\"", text));
  }
  return Override{text.substr(0, eq), text.substr(eq + 1)};
}

void apply_overrides(json& doc, const std::vector<Override>& overrides) {
  if (!doc.is_object()) return;  // parse_scenario reports it
  bool axis_set = false;  // an explicit override of the scaled axis wins over cluster.gpus
  for (const Override& o : overrides) axis_set = axis_set || o.path == "plan.dp" || o.path == "plan.pp";
  for (const Override& o : overrides) {
    if (o.path != "description") check_param_path(o.path);
    const auto parts = split_path(o.path);
    json* node = &doc;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      if (parts[i].empty()) throw sim::ConfigError(fmt::format("--set: empty component in \"{}\"", o.path));
      if (!node->is_object()) {
        throw sim::ConfigError(fmt::format("--set {}: \"{}\" is not an object in the scenario", o.path, parts[i - 1]));
      }
      node = &(*node)[parts[i]];
      if (node->is_null()) *node = json::object();
    }
    json value = json::parse(o.value, nullptr, false);
    if (value.is_discarded()) value = o.value;
    (*node)[parts.back()] = value;
    // A cluster is a preset or a topology file: setting one replaces the other.
    if (o.path == "cluster.preset" || o.path == "cluster.topology") {
      doc["cluster"].erase(o.path == "cluster.preset" ? "topology" : "preset");
    }
    if (o.path == "cluster.gpus" && !axis_set && value.is_number_integer() && doc.contains("plan") &&
        doc["plan"].is_object()) {
      // The scaled axis (plan.scale_axis, default dp) takes gpus / (product of the others).
      json& plan = doc["plan"];
      const std::string axis = plan.contains("scale_axis") && plan["scale_axis"] == "pp" ? "pp" : "dp";
      long long others = 1;
      bool overflow = false;  // raw values (tp 2^62 x pp 4) overflowed; such a product divides no count
      for (const char* k : {"dp", tp_rank_key(plan), "pp", "ep", "cp"}) {
        if (k != axis && plan.contains(k) && plan[k].is_number_integer()) {
          overflow = __builtin_mul_overflow(others, plan[k].get<long long>(), &others) || overflow;
        }
      }
      const long long gpus = value.get<long long>();
      if (!overflow && others > 0 && gpus % others == 0) plan[axis] = gpus / others;
    }
  }
}

Scenario parse_scenario(const json& doc, const std::string& origin) {
  const JsonReader r(origin, sim::ErrorKind::config);
  const JsonPath root;
  r.check_object(doc, {"description", "model", "cluster", "plan", "workload", "measured"}, root, "a scenario");
  Scenario s;
  s.path = origin;
  if (doc.contains("description")) s.description = r.string_at(doc, "description", root, "a scenario");

  const JsonPath pm = root.at("model");
  const json& m = r.require(doc, "model", root, "a scenario");
  read_section(r, m, pm, "model", "a model", s);
  if (m.contains("name") == m.contains("hf_config")) {
    r.fail(pm, "expected exactly one of \"name\" (a zoo model) and \"hf_config\" (a config.json path)");
  }
  if (m.contains("name")) {
    s.model.name = r.string_at(m, "name", pm, "a model");
    std::string names;
    bool known = false;
    for (const auto& info : known_models()) {
      known = known || info.name == s.model.name;
      names += (names.empty() ? "" : ", ") + std::string(info.name);
    }
    if (!known) r.fail(pm.at("name"), fmt::format("expected a zoo model ({}), found \"{}\"", names, s.model.name));
  }
  if (m.contains("hf_config")) s.model.hf_config = resolve_path(origin, r.string_at(m, "hf_config", pm, "a model"));

  const JsonPath pc = root.at("cluster");
  const json& c = r.require(doc, "cluster", root, "a scenario");
  read_section(r, c, pc, "cluster", "a cluster", s);
  if (c.contains("preset") == c.contains("topology")) {
    r.fail(pc, "expected exactly one of \"preset\" and \"topology\" (a topology JSON file)");
  }
  if (c.contains("preset")) {
    s.cluster.spec = r.string_at(c, "preset", pc, "a cluster");
    std::string names;
    bool known = false;
    for (const auto& preset : topo::known_cluster_presets()) {
      known = known || preset.name == s.cluster.spec;
      names += (names.empty() ? "" : ", ") + std::string(preset.name);
    }
    if (!known) r.fail(pc.at("preset"), fmt::format("expected a cluster preset ({}), found \"{}\"", names, s.cluster.spec));
  } else {
    s.cluster.spec = resolve_path(origin, r.string_at(c, "topology", pc, "a cluster"));
  }

  json plan_doc = r.require(doc, "plan", root, "a scenario");
  if (plan_doc.is_object() && !plan_doc.contains("dp") && s.cluster.gpus > 0) {
    // Without dp, data parallelism takes the GPUs the other axes leave: gpus / (tp x pp x ep x cp).
    // Capped past gpus (which it then cannot divide): a product of raw values overflowed.
    const long long cap = s.cluster.gpus + 1LL;
    long long others = 1;
    for (const char* k : {tp_rank_key(plan_doc), "pp", "ep", "cp"}) {
      if (plan_doc.contains(k) && plan_doc[k].is_number_integer() && plan_doc[k].get<long long>() > 0) {
        others = std::min(others * std::min(plan_doc[k].get<long long>(), cap), cap);
      }
    }
    if (s.cluster.gpus % others == 0) plan_doc["dp"] = s.cluster.gpus / others;
  }
  s.plan = read_plan(r, plan_doc, root.at("plan"), origin);
  const int ranks = static_cast<int>(s.plan.ranks());
  for (std::size_t i = 0; i < s.plan.straggler_gpus.size(); ++i) {
    if (s.plan.straggler_gpus[i] >= ranks) {
      r.fail(root.at("plan").at("stragglers").at("gpus").at(i),
             fmt::format("expected a GPU index below dp x tp x pp x ep x cp = {}, found {}", ranks,
                         s.plan.straggler_gpus[i]));
    }
  }
  if (s.cluster.gpus > 0 && ranks != s.cluster.gpus) {
    // Megatron folds EP into the data-parallel ranks (and, with expert_tensor_parallel_size 1,
    // the TP ranks too); here the EP group multiplies them.
    const bool ep_hint = s.plan.ep > 1 && ranks > s.cluster.gpus;
    r.fail(root.at("plan"), fmt::format("{} = {}, but cluster.gpus is {}{}", ranks_formula(s.plan), ranks, s.cluster.gpus,
                                        ep_hint ? " (dp counts the replicas of each EP group: Megatron's data-parallel "
                                                  "size is dp x ep, or dp x ep x expert_tp / tp with an expert_tp "
                                                  "below tp, Megatron's expert_tensor_parallel_size)"
                                                : ""));
  }

  const JsonPath pw = root.at("workload");
  const json& w = r.require(doc, "workload", root, "a scenario");
  const int forms = w.is_object() ? static_cast<int>(w.contains("steps")) + static_cast<int>(w.contains("tokens")) +
                                        static_cast<int>(w.contains("epochs") || w.contains("dataset_samples"))
                                  : 0;
  if (forms != 1) {
    read_section(r, w, pw, "workload", "a workload", s);  // an unknown key or a non-object is the first error
    r.fail(pw, "expected one of \"steps\", \"tokens\" or both \"epochs\" and \"dataset_samples\"");
  }
  if (!w.contains("steps") && !w.contains("tokens")) {
    r.require(w, "epochs", pw, "a workload");
    r.require(w, "dataset_samples", pw, "a workload");
  }
  read_section(r, w, pw, "workload", "a workload", s);
  if (doc.contains("measured")) {
    const JsonPath pm = root.at("measured");
    const json& m = doc.at("measured");
    read_section(r, m, pm, "measured", "a measured run", s);
    r.require(m, "source", pm, "a measured run");
    if (m.contains("run_s") == m.contains("iteration_s")) r.fail(pm, "expected one of \"run_s\" or \"iteration_s\"");
    s.measured.present = true;
  }
  return s;
}

Scenario load_scenario(const std::string& path, const std::vector<Override>& overrides) {
  const JsonReader r(path, sim::ErrorKind::config);
  json doc = r.parse_file();
  apply_overrides(doc, overrides);
  return parse_scenario(doc, path);
}

json plan_to_json(const Plan& p) {
  Scenario s;
  s.plan = p;
  return section_to_json(s, "plan");
}

}  // namespace foresight::strategy
