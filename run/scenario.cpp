#include "strategies/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "sim/error.hpp"
#include "strategies/model_zoo.hpp"
#include "topologies/cluster_builders.hpp"
#include "topologies/json_reader.hpp"

namespace foresight::strategy {
namespace {

using nlohmann::json;
using topo::JsonPath;
using topo::JsonReader;

constexpr long long kMaxCount = 1LL << 40;

std::string resolve_path(const std::string& origin, const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
  const auto base = std::filesystem::path(origin).parent_path();
  return base.empty() ? p : (base / p).string();
}

template <typename E, std::size_t N>
E pick(const JsonReader& r, const json& obj, std::string_view key, const JsonPath& p,
       const std::array<std::pair<std::string_view, E>, N>& choices) {
  const std::string text = r.string_at(obj, key, p, "a plan");
  for (const auto& [name, value] : choices) {
    if (name == text) return value;
  }
  std::string known;
  for (const auto& [name, value] : choices) known += (known.empty() ? "" : ", ") + std::string(name);
  r.fail(p.at(key), fmt::format("expected one of {}, found \"{}\"", known, text));
}

constexpr std::array<std::pair<std::string_view, Precision>, 5> kPrecisions{{{"fp32", Precision::fp32},
                                                                             {"amp_fp16", Precision::amp_fp16},
                                                                             {"amp_bf16", Precision::amp_bf16},
                                                                             {"fp16", Precision::fp16},
                                                                             {"bf16", Precision::bf16}}};
constexpr std::array<std::pair<std::string_view, Framework>, 2> kFrameworks{
    {{"ddp", Framework::ddp}, {"horovod", Framework::horovod}}};
constexpr std::array<std::pair<std::string_view, Optimizer>, 2> kOptimizers{
    {{"sgd", Optimizer::sgd}, {"adam", Optimizer::adam}}};
constexpr std::array<std::pair<std::string_view, Schedule>, 6> kSchedules{{{"none", Schedule::none},
                                                                           {"naive", Schedule::naive},
                                                                           {"gpipe", Schedule::gpipe},
                                                                           {"1f1b", Schedule::one_f_one_b},
                                                                           {"interleaved", Schedule::interleaved},
                                                                           {"pipedream", Schedule::pipedream}}};
constexpr std::array<std::pair<std::string_view, PartitionMode>, 3> kPartitions{
    {{"time", PartitionMode::time}, {"params", PartitionMode::params}, {"uniform", PartitionMode::uniform}}};
constexpr std::array<std::pair<std::string_view, PipelineDriver>, 2> kDrivers{
    {{"per_stage", PipelineDriver::per_stage}, {"single_process", PipelineDriver::single_process}}};
constexpr std::array<std::pair<std::string_view, Recompute>, 4> kRecomputes{{{"none", Recompute::none},
                                                                             {"full", Recompute::full},
                                                                             {"except_last", Recompute::except_last},
                                                                             {"selective", Recompute::selective}}};
constexpr std::array<std::pair<std::string_view, ScaleAxis>, 2> kScaleAxes{{{"dp", ScaleAxis::dp}, {"pp", ScaleAxis::pp}}};
constexpr std::array<std::pair<std::string_view, sim::NetworkKind>, 2> kNetworks{
    {{"analytical", sim::NetworkKind::analytical}, {"flow", sim::NetworkKind::flow}}};

int positive_int(const JsonReader& r, const json& obj, std::string_view key, const JsonPath& p) {
  return static_cast<int>(r.integer_at(obj, key, p, "a plan", 1, 1 << 30));
}

/// The pipeline fields of a plan, checked against each other (the model-dependent checks, such as
/// more stages than layers, come when the model is partitioned).
void read_pipeline(const JsonReader& r, const json& o, const JsonPath& p, Plan& plan) {
  auto has = [&](std::string_view k) { return o.contains(k); };
  if (has("schedule")) plan.schedule = pick(r, o, "schedule", p, kSchedules);
  if (plan.pp > 1 && plan.schedule == Schedule::none) plan.schedule = Schedule::one_f_one_b;
  if (plan.pp == 1 && plan.schedule != Schedule::none) {
    r.fail(p.at("schedule"), fmt::format("expected \"none\" with pp = 1: schedule \"{}\" needs pp > 1",
                                         to_string(plan.schedule)));
  }
  if (has("virtual_stages")) plan.virtual_stages = static_cast<int>(r.integer_at(o, "virtual_stages", p, "a plan", 1, 1024));
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
      plan.partition = pick(r, o, "partition", p, kPartitions);
    }
  } else if (plan.schedule == Schedule::interleaved) {
    plan.partition = PartitionMode::uniform;  // Megatron's equal split into model chunks
  }
  if (has("driver")) plan.driver = pick(r, o, "driver", p, kDrivers);
  if (has("microbatch_overhead")) plan.microbatch_overhead = r.time_at(o, "microbatch_overhead", p, "a plan");
  if (has("dispatch_gil")) plan.dispatch_gil = r.time_at(o, "dispatch_gil", p, "a plan");
  if (plan.dispatch_gil > plan.dispatch_forward) {
    r.fail(p.at("dispatch_gil"), fmt::format("expected at most dispatch_forward ({}), found {}",
                                             sim::to_string(plan.dispatch_forward), sim::to_string(plan.dispatch_gil)));
  }
  plan.p2p_sync = plan.driver == PipelineDriver::per_stage && plan.schedule != Schedule::interleaved;
  if (has("p2p_sync")) plan.p2p_sync = r.bool_at(o, "p2p_sync", p, "a plan");
  if (has("recompute")) plan.recompute = pick(r, o, "recompute", p, kRecomputes);
  if (plan.recompute == Recompute::except_last && plan.pp == 1) {
    r.fail(p.at("recompute"), "expected none, full or selective with pp = 1: except_last is torchgpipe's per-stage "
                              "checkpointing");
  }
  // A pipeline may need more steps to settle than data parallelism: 3, or 8 with the last 4
  // measured when the last two of 3 differ (simulation.cpp). PipeDream never flushes: always 8.
  if (plan.pp > 1 && !has("steps")) {
    plan.steps = plan.schedule == Schedule::pipedream ? kUnsettledSteps : 3;
    plan.settle = plan.schedule != Schedule::pipedream;
  }
  if (has("scale_axis")) plan.scale_axis = pick(r, o, "scale_axis", p, kScaleAxes);
  if (plan.schedule == Schedule::naive && plan.grad_accum != 1 && !has("global_batch")) {
    r.fail(p.at("grad_accum"), fmt::format("expected 1: naive model parallelism runs one micro-batch per step, found {} "
                                           "(use schedule \"gpipe\" for several)", plan.grad_accum));
  }
}

/// plan.moe_routing: {"distribution": balanced | zipf | histogram, "s", "file", "seed",
/// "expected"}. A histogram file is {"source", "shares": [...] or [[...], ...]}.
RoutingSpec read_routing(const JsonReader& r, const json& o, const JsonPath& p, const std::string& origin) {
  r.check_object(o, {"distribution", "s", "file", "seed", "expected"}, p, "moe_routing");
  RoutingSpec spec;
  static constexpr std::array<std::pair<std::string_view, RoutingSpec::Kind>, 3> kKinds{
      {{"balanced", RoutingSpec::Kind::balanced}, {"zipf", RoutingSpec::Kind::zipf}, {"histogram", RoutingSpec::Kind::histogram}}};
  if (o.contains("distribution")) spec.kind = pick(r, o, "distribution", p, kKinds);
  if (o.contains("s")) {
    if (spec.kind != RoutingSpec::Kind::zipf) r.fail(p.at("s"), "expected no s: it is the zipf distribution's exponent");
    spec.zipf_s = r.number_at(o, "s", p, "moe_routing");
    if (!(spec.zipf_s > 0.0) || spec.zipf_s > 10.0) {
      r.fail(p.at("s"), fmt::format("expected an exponent in (0, 10], found {}", spec.zipf_s));
    }
  }
  if (o.contains("seed")) spec.seed = static_cast<std::uint64_t>(r.integer_at(o, "seed", p, "moe_routing", 0, 1LL << 62));
  if (o.contains("expected")) spec.expected = r.bool_at(o, "expected", p, "moe_routing");
  if (spec.kind == RoutingSpec::Kind::histogram) {
    spec.histogram_file = resolve_path(origin, r.string_at(o, "file", p, "moe_routing"));
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

Plan read_plan(const JsonReader& r, const json& o, const JsonPath& p, const std::string& origin) {
  r.check_object(o,
                 {"dp", "tp", "pp", "ep", "micro_batch", "grad_accum", "global_batch", "framework", "precision",
                  "tf32_conv", "tf32_matmul", "optimizer", "bucket_cap", "first_bucket", "fusion_threshold",
                  "cycle_time", "input_rate", "step_overhead", "dispatch_forward", "dispatch_backward",
                  "dispatch_optimizer", "sync_each_step", "comm_compute_slowdown", "network", "steps", "schedule",
                  "virtual_stages", "partition", "driver", "microbatch_overhead", "dispatch_gil", "p2p_sync", "recompute",
                  "scale_axis", "zero", "shard_group", "sequence_parallel", "fused_attention", "fold", "placement", "moe_routing",
                  "gemm_efficiency"},
                 p, "a plan");
  Plan plan;
  auto has = [&](std::string_view k) { return o.contains(k); };
  if (has("dp")) plan.dp = positive_int(r, o, "dp", p);
  if (has("tp")) plan.tp = positive_int(r, o, "tp", p);
  if (has("pp")) plan.pp = positive_int(r, o, "pp", p);
  if (has("ep")) plan.ep = positive_int(r, o, "ep", p);
  if (has("micro_batch")) plan.micro_batch = positive_int(r, o, "micro_batch", p);
  if (has("grad_accum")) plan.grad_accum = positive_int(r, o, "grad_accum", p);
  if (has("global_batch")) plan.global_batch = positive_int(r, o, "global_batch", p);
  if (has("framework")) plan.framework = pick(r, o, "framework", p, kFrameworks);
  if (has("precision")) plan.precision = pick(r, o, "precision", p, kPrecisions);
  if (has("tf32_conv")) plan.tf32_conv = r.bool_at(o, "tf32_conv", p, "a plan");
  if (has("tf32_matmul")) plan.tf32_matmul = r.bool_at(o, "tf32_matmul", p, "a plan");
  if (has("optimizer")) plan.optimizer = pick(r, o, "optimizer", p, kOptimizers);
  if (has("bucket_cap")) plan.bucket_cap = r.bytes_at(o, "bucket_cap", p, "a plan");
  if (has("first_bucket")) plan.first_bucket = r.bytes_at(o, "first_bucket", p, "a plan");
  if (has("fusion_threshold")) plan.fusion_threshold = r.bytes_at(o, "fusion_threshold", p, "a plan");
  if (has("cycle_time")) plan.cycle_time = r.time_at(o, "cycle_time", p, "a plan");
  if (has("input_rate")) {
    plan.input_rate = r.number_at(o, "input_rate", p, "a plan");
    if (plan.input_rate < 0.0) {
      r.fail(p.at("input_rate"), fmt::format("expected samples per second >= 0 (0: unlimited), found {}", plan.input_rate));
    }
  }
  if (has("step_overhead")) plan.step_overhead = r.time_at(o, "step_overhead", p, "a plan");
  if (has("dispatch_forward")) plan.dispatch_forward = r.time_at(o, "dispatch_forward", p, "a plan");
  if (has("dispatch_backward")) plan.dispatch_backward = r.time_at(o, "dispatch_backward", p, "a plan");
  if (has("dispatch_optimizer")) plan.dispatch_optimizer = r.time_at(o, "dispatch_optimizer", p, "a plan");
  if (has("sync_each_step")) plan.sync_each_step = r.bool_at(o, "sync_each_step", p, "a plan");
  if (has("comm_compute_slowdown")) {
    plan.comm_compute_slowdown = r.number_at(o, "comm_compute_slowdown", p, "a plan");
    if (plan.comm_compute_slowdown < 0.0) {
      r.fail(p.at("comm_compute_slowdown"), fmt::format("expected a factor >= 0, found {}", plan.comm_compute_slowdown));
    }
  }
  if (has("network")) plan.network = pick(r, o, "network", p, kNetworks);
  if (has("steps")) plan.steps = static_cast<int>(r.integer_at(o, "steps", p, "a plan", 1, 1000));
  read_pipeline(r, o, p, plan);
  // Parts of a plan whose strategies are not built yet: only their neutral values are accepted.
  if (has("zero")) plan.zero = static_cast<int>(r.integer_at(o, "zero", p, "a plan", 0, 3));
  if (has("shard_group")) {
    plan.shard_group = static_cast<int>(r.integer_at(o, "shard_group", p, "a plan", 1, 1 << 20));
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
  if (plan.zero > 0 && plan.framework != Framework::ddp) {
    r.fail(p.at("zero"), fmt::format("expected 0 with framework {}: ZeRO shards a PyTorch/DeepSpeed data-parallel group, "
                                     "found {}",
                                     to_string(plan.framework), plan.zero));
  }
  if (plan.ep > 1 && plan.zero > 0) {
    r.fail(p.at("ep"), fmt::format("expected 1 with ZeRO-{}: sharding expert states is not simulated, found {}",
                                   plan.zero, plan.ep));
  }
  // Megatron-Core's order puts EP groups right after TP (tp-cp-ep-dp-pp), so they stay inside
  // a node when they fit: data-parallel replicas before pipeline stages.
  if (plan.ep > 1 && !has("placement")) plan.placement = "tp-dp-pp";
  if (has("moe_routing")) plan.routing = read_routing(r, o.at("moe_routing"), p.at("moe_routing"), origin);

  if (has("sequence_parallel")) plan.sequence_parallel = r.bool_at(o, "sequence_parallel", p, "a plan");
  if (has("fused_attention")) plan.fused_attention = r.bool_at(o, "fused_attention", p, "a plan");
  if (has("fold")) plan.fold = r.bool_at(o, "fold", p, "a plan");
  if (has("placement")) {
    plan.placement = r.string_at(o, "placement", p, "a plan");
    std::vector<std::string> dims;
    for (std::size_t k = 0; k < plan.placement.size(); k += 3) dims.push_back(plan.placement.substr(k, 2));
    std::sort(dims.begin(), dims.end());
    if (plan.placement.size() != 8 || plan.placement[2] != '-' || plan.placement[5] != '-' ||
        dims != std::vector<std::string>{"dp", "pp", "tp"}) {
      r.fail(p.at("placement"), fmt::format("expected tp, pp and dp in some order, innermost first, joined by '-' "
                                            "(e.g. \"tp-pp-dp\"), found \"{}\"", plan.placement));
    }
  }
  if (has("gemm_efficiency")) {
    plan.gemm_efficiency = r.number_at(o, "gemm_efficiency", p, "a plan");
    if (!(plan.gemm_efficiency > 0.0 && plan.gemm_efficiency <= 2.0)) {
      r.fail(p.at("gemm_efficiency"), fmt::format("expected a factor in (0, 2], found {}", plan.gemm_efficiency));
    }
  }
  if (plan.sequence_parallel && plan.tp == 1) {
    r.fail(p.at("sequence_parallel"), "expected false with tp = 1: sequence parallelism splits a tensor-parallel group's "
                                      "norms and dropout");
  }
  if (plan.shard_group > 0 && (plan.shard_group > plan.dp || plan.dp % plan.shard_group != 0)) {
    r.fail(p.at("shard_group"), fmt::format("expected a divisor of dp = {} (shard groups tile the data-parallel "
                                            "group), found {}", plan.dp, plan.shard_group));
  }
  // Batch arithmetic: global = dp x micro x accum.
  if (plan.global_batch > 0) {
    const long long per_step = static_cast<long long>(plan.replicas()) * plan.micro_batch;
    if (plan.global_batch % per_step != 0) {
      r.fail(p.at("global_batch"), fmt::format("expected a multiple of dp{} x micro_batch = {} x {} = {}, found {}",
                                               plan.ep > 1 ? " x ep" : "", plan.replicas(), plan.micro_batch, per_step,
                                               plan.global_batch));
    }
    const long long accum = plan.global_batch / per_step;
    if (has("grad_accum") && accum != plan.grad_accum) {
      r.fail(p.at("grad_accum"), fmt::format("expected {} (global_batch {} / (dp {} x micro_batch {})), found {}",
                                             accum, plan.global_batch, plan.dp, plan.micro_batch, plan.grad_accum));
    }
    plan.grad_accum = static_cast<int>(accum);
  } else {
    plan.global_batch = plan.replicas() * plan.micro_batch * plan.grad_accum;
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

std::int64_t Scenario::total_steps() const {
  if (workload.steps > 0) return workload.steps;
  const std::int64_t per_epoch = (workload.dataset_samples + plan.global_batch - 1) / plan.global_batch;
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
    if (o.path == "cluster.gpus" && !axis_set && value.is_number_integer() && doc.contains("plan") &&
        doc["plan"].is_object()) {
      // The scaled axis (plan.scale_axis, default dp) takes gpus / (product of the others).
      json& plan = doc["plan"];
      const std::string axis = plan.contains("scale_axis") && plan["scale_axis"] == "pp" ? "pp" : "dp";
      long long others = 1;
      for (const char* k : {"dp", "tp", "pp", "ep"}) {
        if (k != axis && plan.contains(k) && plan[k].is_number_integer()) others *= plan[k].get<long long>();
      }
      const long long gpus = value.get<long long>();
      if (others > 0 && gpus % others == 0) plan[axis] = gpus / others;
    }
  }
}

Scenario parse_scenario(const json& doc, const std::string& origin) {
  const JsonReader r(origin, sim::ErrorKind::config);
  const JsonPath root;
  r.check_object(doc, {"description", "model", "cluster", "plan", "workload"}, root, "a scenario");
  Scenario s;
  s.path = origin;
  if (doc.contains("description")) s.description = r.string_at(doc, "description", root, "a scenario");

  const JsonPath pm = root.at("model");
  const json& m = r.require(doc, "model", root, "a scenario");
  r.check_object(m, {"name", "hf_config", "classes", "seq_len"}, pm, "a model");
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
  if (m.contains("classes")) s.model.classes = static_cast<int>(r.integer_at(m, "classes", pm, "a model", 1, 1 << 24));
  if (m.contains("seq_len")) s.model.seq_len = static_cast<int>(r.integer_at(m, "seq_len", pm, "a model", 1, 1 << 24));

  const JsonPath pc = root.at("cluster");
  const json& c = r.require(doc, "cluster", root, "a scenario");
  r.check_object(c, {"preset", "topology", "gpus"}, pc, "a cluster");
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
  if (c.contains("gpus")) s.cluster.gpus = static_cast<int>(r.integer_at(c, "gpus", pc, "a cluster", 1, 1 << 24));

  json plan_doc = r.require(doc, "plan", root, "a scenario");
  if (plan_doc.is_object() && !plan_doc.contains("dp") && s.cluster.gpus > 0) {
    // Without dp, data parallelism takes the GPUs the other axes leave: gpus / (tp x pp x ep).
    long long others = 1;
    for (const char* k : {"tp", "pp", "ep"}) {
      if (plan_doc.contains(k) && plan_doc[k].is_number_integer() && plan_doc[k].get<long long>() > 0) {
        others *= plan_doc[k].get<long long>();
      }
    }
    if (s.cluster.gpus % others == 0) plan_doc["dp"] = s.cluster.gpus / others;
  }
  s.plan = read_plan(r, plan_doc, root.at("plan"), origin);
  const int ranks = s.plan.dp * s.plan.tp * s.plan.pp * s.plan.ep;
  if (s.cluster.gpus > 0 && ranks != s.cluster.gpus) {
    r.fail(root.at("plan"), fmt::format("dp x tp x pp x ep = {} x {} x {} x {} = {}, but cluster.gpus is {}", s.plan.dp,
                                        s.plan.tp, s.plan.pp, s.plan.ep, ranks, s.cluster.gpus));
  }

  const JsonPath pw = root.at("workload");
  const json& w = r.require(doc, "workload", root, "a scenario");
  r.check_object(w, {"epochs", "dataset_samples", "steps"}, pw, "a workload");
  if (w.contains("steps") == (w.contains("epochs") || w.contains("dataset_samples"))) {
    r.fail(pw, "expected either \"steps\" or both \"epochs\" and \"dataset_samples\"");
  }
  if (w.contains("steps")) {
    s.workload.steps = r.integer_at(w, "steps", pw, "a workload", 1, kMaxCount);
  } else {
    s.workload.epochs = static_cast<int>(r.integer_at(w, "epochs", pw, "a workload", 1, 1 << 24));
    s.workload.dataset_samples = r.integer_at(w, "dataset_samples", pw, "a workload", 1, kMaxCount);
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
  return json{{"dp", p.dp},
              {"tp", p.tp},
              {"pp", p.pp},
              {"ep", p.ep},
              {"micro_batch", p.micro_batch},
              {"grad_accum", p.grad_accum},
              {"global_batch", p.global_batch},
              {"framework", std::string(to_string(p.framework))},
              {"precision", std::string(to_string(p.precision))},
              {"tf32_conv", p.tf32_conv},
              {"tf32_matmul", p.tf32_matmul},
              {"optimizer", std::string(to_string(p.optimizer))},
              {"bucket_cap", sim::to_string(p.bucket_cap)},
              {"first_bucket", sim::to_string(p.first_bucket)},
              {"fusion_threshold", sim::to_string(p.fusion_threshold)},
              {"cycle_time", sim::to_string(p.cycle_time)},
              {"input_rate", p.input_rate},
              {"step_overhead", sim::to_string(p.step_overhead)},
              {"dispatch_forward", sim::to_string(p.dispatch_forward)},
              {"dispatch_backward", sim::to_string(p.dispatch_backward)},
              {"dispatch_optimizer", sim::to_string(p.dispatch_optimizer)},
              {"sync_each_step", p.sync_each_step},
              {"comm_compute_slowdown", p.comm_compute_slowdown},
              {"network", std::string(sim::to_string(p.network))},
              {"steps", p.steps},
              {"schedule", std::string(to_string(p.schedule))},
              {"virtual_stages", p.virtual_stages},
              {"partition", p.partition == PartitionMode::explicit_units ? json(p.partition_units)
                                                                          : json(std::string(to_string(p.partition)))},
              {"driver", std::string(to_string(p.driver))},
              {"microbatch_overhead", sim::to_string(p.microbatch_overhead)},
              {"dispatch_gil", sim::to_string(p.dispatch_gil)},
              {"p2p_sync", p.p2p_sync},
              {"recompute", std::string(to_string(p.recompute))},
              {"sequence_parallel", p.sequence_parallel},
              {"zero", p.zero},
              {"shard_group", p.shard_group},
              {"fused_attention", p.fused_attention},
              {"fold", p.fold},
              {"placement", p.placement},
              {"gemm_efficiency", p.gemm_efficiency},
              {"scale_axis", p.scale_axis == ScaleAxis::dp ? "dp" : "pp"}};
}

}  // namespace foresight::strategy
