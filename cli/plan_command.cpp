// foresight plan SCENARIO: search the parallel plans of a scenario's model, cluster and global
// batch (run/planner.hpp), and print the best ones, each with the --set flags that make
// `foresight simulate` run it, and why the others were left out.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include "cli/commands.hpp"
#include "cli/inputs.hpp"
#include "common/error.hpp"
#include "common/atomic_file.hpp"
#include "plots/svg_plot.hpp"
#include "run/compare.hpp"
#include "run/plan_json.hpp"
#include "run/planner.hpp"
#include "topologies/cluster_builders.hpp"

namespace foresight::cli {
namespace {

struct PlanCommandOptions {
  std::string scenario;
  ScenarioFlags flags;
  std::string tp, pp, virtual_stages, micro_batch, recompute, zero, sequence_parallel, ep, expert_tp;
  strategy::PlanOptions search;
  bool json = false;
  std::string csv;
  std::string output;
  // Hardware comparison
  std::string clusters;
  std::string gpus;
  double budget = 0.0;
  std::string plot;
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
  out += fmt::format("\n{} plans: {} fit ({} shown), {} simulated, {} compiled (memory and stream bound checked; {} first "
                     "as one block of replicas for all their placements)\n",
                     s.rows.size(), counts["best"] + counts["fits"], shown, s.simulated, s.compiled, s.one_block);
  std::map<strategy::PlanRow::Bound, int> by;
  for (const auto& r : s.rows) {
    if (r.status == strategy::PlanRow::Status::bound) ++by[r.bound_by];
  }
  out += fmt::format("left out: {} invalid, {} over the memory limit, {} out of memory when simulated, {} pruned by "
                     "their lower bound ({} {}, {} {}, {} {})\n",
                     counts["invalid"], counts["over memory"], counts["out of memory"], counts["pruned by bound"],
                     by[strategy::PlanRow::Bound::flops], to_string(strategy::PlanRow::Bound::flops),
                     by[strategy::PlanRow::Bound::stream], to_string(strategy::PlanRow::Bound::stream),
                     by[strategy::PlanRow::Bound::path], to_string(strategy::PlanRow::Bound::path));
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

/// A plan row's expert TP: its own, or tp's where the plan leaves it (experts split as TP);
/// empty for plans without experts.
std::string expert_tp(const nlohmann::json& plan) {
  if (!plan.contains("ep")) return "";
  if (plan.contains("expert_tp")) return plan["expert_tp"].dump();
  return plan.contains("tp") ? plan["tp"].dump() : "";
}

std::string csv(const strategy::PlanSearch& s) {
  std::string out = "status,tp,pp,dp,virtual_stages,micro_batch,recompute,zero,sequence_parallel,ep,expert_tp,bound_s,"
                    "bound_by,iteration_s,tokens_per_s,samples_per_s,mfu,peak_bytes,usd_run,kwh_run,reason\n";
  for (const auto& r : s.rows) {
    auto field = [&](const char* k) { return r.plan.contains(k) ? (r.plan[k].is_string() ? r.plan[k].get<std::string>() : r.plan[k].dump()) : ""; };
    std::string reason = r.reason;
    for (char& c : reason) c = c == '"' ? '\'' : c;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{:.6g},{},{:.9g},{:.9g},{:.9g},{:.6g},{:.6g},{},{},\"{}\"\n",
                       to_string(r.status), field("tp"), field("pp"), field("dp"), field("virtual_stages"),
                       field("micro_batch"), field("recompute"), field("zero"), field("sequence_parallel"), field("ep"),
                       expert_tp(r.plan), r.bound_s, to_string(r.bound_by),
                       r.iteration_s, r.tokens_per_s, r.samples_per_s, r.mfu, r.peak_bytes,
                       r.usd_run >= 0 ? fmt::format("{:.9g}", r.usd_run) : "",
                       r.kwh_run >= 0 ? fmt::format("{:.9g}", r.kwh_run) : "", reason);
  }
  return out;
}

std::string duration(double s) {
  return s >= 2 * 86400.0 ? fmt::format("{:.1f} d", s / 86400.0) : fmt::format("{:.1f} h", s / 3600.0);
}

std::string money(double usd) { return usd < 0 ? "-" : strategy::grouped_whole(usd); }

std::string compare_table(const std::vector<strategy::HardwareRow>& rows, double budget, const std::string& scenario) {
  std::string out = fmt::format("{:<16} {:<16} {:>6}  {:<50} {:>10} {:>11} {:>6} {:>9} {:>13} {:>9}  {}\n", "cluster", "GPU",
                                "GPUs", "best plan", "iteration", "tokens/s", "MFU", "run", "run USD", "run MWh", "");
  for (const auto& r : rows) {
    if (!r.best) {
      out += fmt::format("{:<16} {:<16} {:>6}  {}\n", r.option.cluster, r.gpu.empty() ? "-" : r.gpu, r.option.gpus, r.reason);
      continue;
    }
    const auto& b = *r.best;
    std::string marks = r.pareto ? "Pareto" : "";
    if (!r.within_budget) marks += marks.empty() ? "over budget" : ", over budget";
    if (b.usd_run < 0) marks += marks.empty() ? "unpriced" : ", unpriced";
    out += fmt::format("{:<16} {:<16} {:>6}  {:<50} {:>8.4g} s {:>11.5g} {:>5.1f}% {:>9} {:>13} {:>9}  {}\n",
                       r.option.cluster, r.gpu, r.option.gpus, b.label, b.iteration_s,
                       b.tokens_per_s > 0 ? b.tokens_per_s : b.samples_per_s, b.mfu * 100.0, duration(b.run_s),
                       money(b.usd_run), b.kwh_run >= 0 ? fmt::format("{:.4g}", b.kwh_run / 1000.0) : "-", marks);
  }
  const strategy::HardwareRow* fastest = nullptr;
  const strategy::HardwareRow* cheapest = nullptr;
  const strategy::HardwareRow* fastest_in_budget = nullptr;
  std::map<std::string, std::string> basis_of;  // GPU model -> its price basis
  std::set<std::string> kinds;                    // the bases, without their instance ("AWS Capacity Blocks")
  for (const auto& r : rows) {
    if (!r.best) continue;
    if (fastest == nullptr || r.best->run_s < fastest->best->run_s) fastest = &r;
    if (r.best->usd_run < 0) continue;
    if (cheapest == nullptr || r.best->usd_run < cheapest->best->usd_run) cheapest = &r;
    if (r.within_budget && (fastest_in_budget == nullptr || r.best->run_s < fastest_in_budget->best->run_s)) {
      fastest_in_budget = &r;
    }
    const std::string basis = r.price_basis.empty() ? "(basis unstated)" : r.price_basis;
    basis_of[r.gpu] = basis;
    kinds.insert(basis.substr(0, basis.find(" (")));
  }
  const auto name = [](const strategy::HardwareRow* r) {
    return fmt::format("{} x {} ({}, {}, {})", r->option.cluster, r->option.gpus, r->best->label, duration(r->best->run_s),
                       r->best->usd_run >= 0 ? "$" + money(r->best->usd_run) : "unpriced");
  };
  out += "\n";
  if (fastest != nullptr) out += fmt::format("fastest:  {}\n", name(fastest));
  if (cheapest != nullptr) out += fmt::format("cheapest: {}\n", name(cheapest));
  if (budget > 0) {
    out += fastest_in_budget != nullptr
               ? fmt::format("fastest within ${}: {}\n", money(budget), name(fastest_in_budget))
               : fmt::format("no priced option runs within ${}\n", money(budget));
  }
  if (kinds.size() > 1) {
    out += "note: the prices compared have different bases, not like with like:";
    for (const auto& [gpu, basis] : basis_of) out += fmt::format("\n  {} {}", gpu, basis);
    out += "\n      pass --prices with quotes of one basis to compare them fairly\n";
  }
  for (const auto& r : rows) {
    if (r.best && r.pareto) {
      const bool preset = topo::is_cluster_preset(r.option.cluster);
      out += fmt::format("\nrun {} x {} with: foresight simulate {} --set cluster.{}={} --set cluster.gpus={}",
                         r.option.cluster, r.option.gpus, scenario, preset ? "preset" : "topology", r.option.cluster,
                         r.option.gpus);
      for (const auto& set : r.best->sets()) out += " --set " + set;
    }
  }
  out += "\n";
  return out;
}

std::string compare_csv(const std::vector<strategy::HardwareRow>& rows) {
  std::string out = "cluster,gpu,gpus,tp,pp,dp,virtual_stages,micro_batch,recompute,zero,sequence_parallel,ep,expert_tp,"
                    "iteration_s,run_s,tokens_per_s,samples_per_s,mfu,peak_bytes,usd_run,kwh_run,price_basis,pareto,within_budget,reason\n";
  for (const auto& r : rows) {
    const auto field = [&](const char* k) {
      if (!r.best || !r.best->plan.contains(k)) return std::string();
      const auto& v = r.best->plan[k];
      return v.is_string() ? v.get<std::string>() : v.dump();
    };
    std::string reason = r.reason;
    for (char& c : reason) c = c == '"' ? '\'' : c;
    const strategy::PlanRow none;
    const strategy::PlanRow& b = r.best ? *r.best : none;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.6g},{:.6g},{},{},\"{}\",{},{},\"{}\"\n",
                       r.option.cluster, r.gpu, r.option.gpus, field("tp"), field("pp"), field("dp"), field("virtual_stages"),
                       field("micro_batch"), field("recompute"), field("zero"), field("sequence_parallel"), field("ep"),
                       r.best ? expert_tp(r.best->plan) : std::string(), b.iteration_s,
                       b.run_s, b.tokens_per_s, b.samples_per_s, b.mfu, b.peak_bytes,
                       b.usd_run >= 0 ? fmt::format("{:.9g}", b.usd_run) : "",
                       b.kwh_run >= 0 ? fmt::format("{:.9g}", b.kwh_run) : "", r.price_basis, r.pareto ? 1 : 0,
                       r.within_budget ? 1 : 0, reason);
  }
  return out;
}

/// Run time against run cost, one marker series per cluster and the Pareto front as a line.
std::string pareto_svg(const std::vector<strategy::HardwareRow>& rows, const std::string& scenario) {
  double longest = 0.0;
  for (const auto& r : rows) {
    if (r.best && r.best->usd_run >= 0) longest = std::max(longest, r.best->run_s);
  }
  const bool days = longest >= 2 * 86400.0;
  const double unit = days ? 86400.0 : 3600.0;
  validate::Chart chart;
  chart.title = "run time vs run cost (best plan of each cluster and GPU count)";
  chart.x.label = days ? "run time (days)" : "run time (hours)";
  chart.y.label = "run cost (USD)";
  std::vector<std::pair<double, double>> front;
  for (const auto& r : rows) {
    if (!r.best || r.best->usd_run < 0) continue;
    const std::pair<double, double> point{r.best->run_s / unit, r.best->usd_run};
    const std::string label = fmt::format("{} ({})", r.option.cluster, r.gpu);
    auto it = std::find_if(chart.series.begin(), chart.series.end(), [&](const auto& s) { return s.label == label; });
    if (it == chart.series.end()) {
      chart.series.push_back(validate::Series{label, {}, true});
      it = chart.series.end() - 1;
    }
    it->points.push_back(point);
    if (r.pareto) front.push_back(point);
  }
  if (chart.series.empty()) {
    throw sim::ConfigError("--plot: no option has a priced plan that fits: nothing to plot (see the price file)");
  }
  std::sort(front.begin(), front.end());
  chart.series.push_back(validate::Series{"Pareto front", front, false});
  return validate::svg_charts(fmt::format("foresight plan {}", scenario), {chart});
}

int run_compare(const PlanCommandOptions& o, const strategy::PlanSpace& space, const std::vector<strategy::Override>& overrides) {
  const nlohmann::json doc = strategy::scenario_document({o.scenario, std::nullopt}, overrides);
  const strategy::Scenario base = strategy::parse_scenario(doc, o.scenario);
  const std::vector<std::string> clusters = o.clusters.empty() ? std::vector<std::string>{} : comma_list("--clusters", o.clusters);
  const std::vector<int> counts = o.gpus.empty() ? std::vector<int>{} : integers("--gpus", o.gpus, 1);
  if (!(o.budget >= 0.0) || !std::isfinite(o.budget)) {
    throw sim::ConfigError(fmt::format("--budget: expected a number of USD >= 0, found {}", o.budget));
  }
  const std::vector<strategy::HardwareOption> options = strategy::hardware_options(base, clusters, counts);
  const auto inputs = o.flags.simulation_inputs();
  const auto rows = strategy::compare_hardware(o.scenario, doc, options, space, o.search, inputs, o.budget,
                                               [](const std::string& line) { fmt::print(stderr, "plan: {}\n", line); });
  Outputs out;
  if (!o.plot.empty()) out.emit(o.plot, pareto_svg(rows, o.scenario));
  if (!o.csv.empty()) out.emit(o.csv, compare_csv(rows));
  out.emit(o.output, o.json ? strategy::hardware_json(rows).dump(1) + "\n" : compare_table(rows, o.budget, o.scenario));
  out.commit();
  return 0;
}

int run_plan(const PlanCommandOptions& o) {
  strategy::PlanSpace space;  // a dimension left empty: the planner's default for each cluster
  if (!o.tp.empty()) space.tp = integers("--tp", o.tp, 1);
  if (!o.pp.empty()) space.pp = integers("--pp", o.pp, 1);
  if (!o.virtual_stages.empty()) space.virtual_stages = integers("--virtual-stages", o.virtual_stages, 1);
  if (!o.micro_batch.empty()) space.micro_batch = integers("--micro-batches", o.micro_batch, 1);
  if (!o.zero.empty()) space.zero = integers("--zero", o.zero, 0);
  if (!o.ep.empty()) space.ep = integers("--ep", o.ep, 1);
  if (!o.expert_tp.empty()) {
    for (const std::string& v : comma_list("--expert-tp", o.expert_tp)) {
      const std::optional<long> e = v == "tp" ? std::optional<long>(0) : whole_integer(v);
      if (!e || *e < 0 || *e > (1 << 20) || (*e == 0 && v != "tp")) {
        throw sim::ConfigError(fmt::format("--expert-tp: expected tp or an integer >= 1, found \"{}\"", v));
      }
      space.expert_tp.push_back(static_cast<int>(*e));
    }
  }
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
  const auto overrides = o.flags.overrides();
  if (!o.clusters.empty() || !o.gpus.empty()) return run_compare(o, space, overrides);
  if (o.budget > 0.0 || !o.plot.empty()) {
    throw sim::ConfigError("--budget and --plot compare hardware: give --clusters and/or --gpus with them");
  }
  const auto search = strategy::search_plans(o.scenario, overrides, space, o.search, o.flags.simulation_inputs(),
                                             [](const std::string& line) { fmt::print(stderr, "plan: {}\n", line); });
  Outputs out;
  if (!o.csv.empty()) out.emit(o.csv, csv(search));
  out.emit(o.output, o.json ? strategy::plan_search_json(search).dump(1) + "\n" : table(search, o.search.top, o.scenario));
  out.commit();
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<PlanCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Search the parallel plans (TP x PP x EP x DP, virtual stages, micro-batch, recompute, ZeRO, sequence "
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
  cmd->add_option("--ep", o->ep,
                  "Expert-parallel sizes to try, for models with routed experts (default: powers of two up to 64 that "
                  "divide the experts)");
  cmd->add_option("--expert-tp", o->expert_tp,
                  "Expert TP to try, for models with routed experts: tp (experts split as TP) or integers e (each "
                  "expert split over e TP ranks, 1 whole; where e < tp divides tp, tp / e divides ep and sequence "
                  "parallelism is on) (default: tp,1; the scenario's own expert_tp alone when it sets one)");
  cmd->add_option("--sequence-parallel", o->sequence_parallel, "on, off or on,off (default: both, with tp > 1)");
  cmd->add_option("--memory-margin", o->search.memory_margin,
                  "Fraction of each GPU's memory a plan must leave free (default: 0.1)");
  cmd->add_option("--top", o->search.top, "Plans to print (default: 10; with --clusters each option's best alone)")->check(at_least(1));
  cmd->add_option("--jobs", o->search.jobs, "Parallel simulations (default: all cores)")->check(at_least(0));
  cmd->add_option("--clusters", o->clusters,
                  "Compare hardware: clusters (presets or topology files) to search, comma-separated (default: the "
                  "scenario's)");
  cmd->add_option("--gpus", o->gpus, "Compare hardware: GPU counts to search on each cluster (default: the scenario's)");
  cmd->add_option("--budget", o->budget, "Compare hardware: mark options whose run costs more than this many USD");
  cmd->add_option("--plot", o->plot, "Compare hardware: write run time vs run cost, with the Pareto front, as SVG");
  cmd->add_option("--csv", o->csv, "Also write every candidate (or every hardware option) to this CSV file");
  cmd->add_flag("--json", o->json, "Print every candidate as JSON");
  cmd->add_option("-o,--output", o->output, "Write the result to this file (atomically) instead of standard output");
  cmd->callback([&run, o] { run = [o] { return run_plan(*o); }; });
}

}  // namespace foresight::cli
