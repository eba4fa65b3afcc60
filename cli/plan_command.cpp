// foresight plan SCENARIO: search the parallel plans of a scenario's model, cluster and global
// batch (run/planner.hpp), and print the best ones, each with the --set flags that make
// `foresight simulate` run it, and why the others were left out.
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <memory>

#include "cli/commands.hpp"
#include "cli/inputs.hpp"
#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "run/planner.hpp"
#include "topologies/cluster_builders.hpp"

namespace foresight::cli {
namespace {

struct PlanCommandOptions {
  std::string scenario;
  ScenarioFlags flags;
  std::string tp, pp, virtual_stages, micro_batch, recompute, zero, sequence_parallel;
  strategy::PlanOptions search;
  bool json = false;
  std::string csv;
  std::string output;
};

std::vector<int> integers(const std::string& flag, const std::string& text, int lo) {
  std::vector<int> out;
  for (const std::string& s : comma_list(flag, text)) {
    const auto v = whole_integer(s);
    if (!v || *v < lo || *v > (1 << 24)) {
      throw sim::ConfigError(fmt::format("{}: expected integers >= {}, found \"{}\"", flag, lo, s));
    }
    out.push_back(static_cast<int>(*v));
  }
  return out;
}

/// What a reason is an instance of: the reader's JSON pointer ("/plan/global_batch"), or the
/// planner's own check up to its numbers ("tp x pp x ep").
std::string family(const std::string& reason) {
  const auto end = reason.rfind('/', 0) == 0 ? reason.find(':') : reason.find(" = ");
  return end == std::string::npos ? reason : reason.substr(0, end);
}

bool strategy_family_matches(const std::string& reason, const std::string& f) { return family(reason) == f; }

std::string gib(double bytes) { return fmt::format("{:.1f}", bytes / (1 << 30)); }

std::string table(const strategy::PlanSearch& s, int top, const std::string& scenario) {
  std::string out = fmt::format("{:>4}  {:<52} {:>11} {:>11} {:>6} {:>9} {:>12} {:>10}\n", "rank", "plan", "iteration",
                                "tokens/s", "MFU", "peak GiB", "run USD", "run MWh");
  int shown = 0;
  for (const auto& r : s.rows) {
    if (r.status != strategy::PlanRow::Status::best && r.status != strategy::PlanRow::Status::fits) continue;
    if (shown == top) break;
    ++shown;
    out += fmt::format("{:>4}  {:<52} {:>9.4g} s {:>11.5g} {:>5.1f}% {:>9} {:>12} {:>10}\n", shown, r.label, r.iteration_s,
                       r.tokens_per_s > 0 ? r.tokens_per_s : r.samples_per_s, r.mfu * 100.0, gib(r.peak_bytes),
                       r.usd_run >= 0 ? fmt::format("{:.0f}", r.usd_run) : "-",
                       r.kwh_run >= 0 ? fmt::format("{:.4g}", r.kwh_run / 1000.0) : "-");
  }
  if (shown == 0) out += "  no plan fits\n";
  std::map<std::string_view, int> counts;
  std::map<std::string, int> reasons;
  for (const auto& r : s.rows) {
    ++counts[to_string(r.status)];
    if (r.status == strategy::PlanRow::Status::invalid) {
      ++reasons[family(r.reason)];
    }
  }
  out += fmt::format("\n{} plans: {} fit ({} shown), {} simulated, {} compiled for memory\n", s.rows.size(),
                     counts["best"] + counts["fits"], shown, s.simulated, s.compiled);
  out += fmt::format("left out: {} invalid, {} over the memory limit, {} out of memory when simulated, {} pruned by "
                     "their lower bound\n",
                     counts["invalid"], counts["over memory"], counts["out of memory"], counts["pruned by bound"]);
  for (const auto& [family, n] : reasons) {
    std::string example;
    for (const auto& r : s.rows) {
      if (r.status == strategy::PlanRow::Status::invalid && strategy_family_matches(r.reason, family)) {
        example = r.reason;
        break;
      }
    }
    out += fmt::format("  invalid {:>5} x {}\n", n, example);
  }
  for (const auto& r : s.rows) {
    if (r.status == strategy::PlanRow::Status::best) {
      out += fmt::format("\nrun the best with: foresight simulate {}", scenario);
      for (const auto& set : r.sets()) out += " --set " + set;
      out += "\n";
    }
  }
  return out;
}

std::string csv(const strategy::PlanSearch& s) {
  std::string out = "status,tp,pp,dp,virtual_stages,micro_batch,recompute,zero,sequence_parallel,bound_s,iteration_s,"
                    "tokens_per_s,samples_per_s,mfu,peak_bytes,usd_run,kwh_run,reason\n";
  for (const auto& r : s.rows) {
    auto field = [&](const char* k) { return r.plan.contains(k) ? (r.plan[k].is_string() ? r.plan[k].get<std::string>() : r.plan[k].dump()) : ""; };
    std::string reason = r.reason;
    for (char& c : reason) c = c == '"' ? '\'' : c;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{:.6g},{:.9g},{:.9g},{:.9g},{:.6g},{:.6g},{},{},\"{}\"\n",
                       to_string(r.status), field("tp"), field("pp"), field("dp"), field("virtual_stages"),
                       field("micro_batch"), field("recompute"), field("zero"), field("sequence_parallel"), r.bound_s,
                       r.iteration_s, r.tokens_per_s, r.samples_per_s, r.mfu, r.peak_bytes,
                       r.usd_run >= 0 ? fmt::format("{:.9g}", r.usd_run) : "",
                       r.kwh_run >= 0 ? fmt::format("{:.9g}", r.kwh_run) : "", reason);
  }
  return out;
}

nlohmann::json to_json(const strategy::PlanSearch& s) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : s.rows) {
    rows.push_back({{"status", std::string(to_string(r.status))}, {"plan", r.plan}, {"label", r.label},
                    {"reason", r.reason}, {"bound_s", r.bound_s}, {"iteration_s", r.iteration_s},
                    {"tokens_per_s", r.tokens_per_s}, {"samples_per_s", r.samples_per_s}, {"mfu", r.mfu},
                    {"peak_bytes", r.peak_bytes}, {"set", r.sets()},
                    {"usd_run", r.usd_run >= 0 ? nlohmann::json(r.usd_run) : nlohmann::json(nullptr)},
                    {"kwh_run", r.kwh_run >= 0 ? nlohmann::json(r.kwh_run) : nlohmann::json(nullptr)}});
  }
  return {{"plans", rows}, {"simulated", s.simulated}, {"compiled", s.compiled}};
}

int run_plan(const PlanCommandOptions& o) {
  const topo::JsonReader reader(o.scenario, sim::ErrorKind::config);
  auto doc = reader.parse_file();
  const auto overrides = o.flags.overrides();
  strategy::apply_overrides(doc, overrides);
  const strategy::Scenario base = strategy::parse_scenario(doc, o.scenario);
  const topo::Cluster cluster = topo::resolve_cluster(base.cluster.spec, base.cluster.gpus);
  strategy::PlanSpace space = strategy::default_plan_space(base, strategy::scenario_model(base), cluster);
  if (!o.tp.empty()) space.tp = integers("--tp", o.tp, 1);
  if (!o.pp.empty()) space.pp = integers("--pp", o.pp, 1);
  if (!o.virtual_stages.empty()) space.virtual_stages = integers("--virtual-stages", o.virtual_stages, 1);
  if (!o.micro_batch.empty()) space.micro_batch = integers("--micro-batches", o.micro_batch, 1);
  if (!o.zero.empty()) space.zero = integers("--zero", o.zero, 0);
  if (!o.recompute.empty()) space.recompute = comma_list("--recompute", o.recompute);
  if (!o.sequence_parallel.empty()) {
    space.sequence_parallel.clear();
    for (const std::string& v : comma_list("--sequence-parallel", o.sequence_parallel)) {
      if (v != "on" && v != "off") throw sim::ConfigError(fmt::format("--sequence-parallel: expected on or off, found \"{}\"", v));
      space.sequence_parallel.push_back(v == "on");
    }
  }
  if (!(o.search.memory_margin >= 0.0 && o.search.memory_margin < 1.0)) {
    throw sim::ConfigError(fmt::format("--memory-margin: expected a fraction in [0, 1), found {}", o.search.memory_margin));
  }
  const auto search = strategy::search_plans(o.scenario, overrides, space, o.search, o.flags.simulation_inputs(),
                                             [](const std::string& line) { fmt::print(stderr, "plan: {}\n", line); });
  if (!o.csv.empty()) emit(o.csv, csv(search));
  emit(o.output, o.json ? to_json(search).dump(1) + "\n" : table(search, o.search.top, o.scenario));
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<PlanCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Search the parallel plans (TP x PP x DP, virtual stages, micro-batch, recompute, ZeRO, sequence "
              "parallelism) of a scenario's model, cluster and global batch; print the fastest that fit");
  cmd->add_option("scenario", o->scenario, "Scenario JSON file: its model, cluster, global batch and fixed plan fields")
      ->required();
  o->flags.add_to(*cmd, false);
  cmd->add_option("--tp", o->tp, "Tensor-parallel sizes to try (default: powers of two up to a node's GPUs)");
  cmd->add_option("--pp", o->pp, "Pipeline depths to try (default: powers of two up to 64)");
  cmd->add_option("--virtual-stages", o->virtual_stages, "Virtual stages per pipeline rank (default: 1,2)");
  cmd->add_option("--micro-batches", o->micro_batch, "Micro-batch sizes to try (default: 1,2,4,8)");
  cmd->add_option("--recompute", o->recompute, "Recompute modes to try (default: none,selective,full)");
  cmd->add_option("--zero", o->zero, "ZeRO stages to try (default: 0,1)");
  cmd->add_option("--sequence-parallel", o->sequence_parallel, "on, off or on,off (default: both, with tp > 1)");
  cmd->add_option("--memory-margin", o->search.memory_margin,
                  "Fraction of each GPU's memory a plan must leave free (default: 0.1)");
  cmd->add_option("--top", o->search.top, "Plans to print (default: 10)")->check(at_least(1));
  cmd->add_option("--jobs", o->search.jobs, "Parallel simulations (default: all cores)")->check(at_least(0));
  cmd->add_option("--csv", o->csv, "Also write every candidate with its status to this CSV file");
  cmd->add_flag("--json", o->json, "Print every candidate as JSON");
  cmd->add_option("-o,--output", o->output, "Write the result to this file (atomically) instead of standard output");
  cmd->callback([&run, o] { run = [o] { return run_plan(*o); }; });
}

}  // namespace foresight::cli
