#include "validate/suite_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "plots/svg_plot.hpp"

namespace foresight::validate {
namespace {

std::string threshold_text(const DatasetResult& r) {
  return r.threshold_pct ? fmt::format("{:g}%", *r.threshold_pct) : std::string("none");
}

std::string goal_text(const DatasetResult& r) {
  return r.goal_pct > 0.0 ? fmt::format("{:g}%", r.goal_pct) : std::string("none");
}

std::string verdict(const DatasetResult& r) {
  if (!r.threshold_pct) return r.predictions > 0 ? "reported" : (r.cases.empty() ? "skipped" : "unsupported");
  return r.passed() ? "pass" : "FAIL";
}

std::string summary_text(const DatasetResult& r) {
  if (r.predictions == 0) return "no prediction evaluated";
  return fmt::format("MAPE {:.1f}% over {} predictions, worst {:+.1f}% ({})", r.mape_pct, r.predictions, r.worst_pct,
                     r.worst_id);
}

/// Up to 4 significant digits.
std::string number(double v) { return fmt::format("{:.4g}", v); }

/// What the two overall figures pool, as the reports name them.
constexpr const char* kRunsLabel = "training runs simulated from a scenario";
constexpr const char* kAllLabel = "every dataset";

std::string overall_text(const Overall& o) {
  if (o.predictions == 0) return "no prediction evaluated";
  return fmt::format("MAPE {:.1f}% over {} prediction cases of {} datasets, worst {:+.1f}% ({}, {})", o.mape_pct,
                     o.predictions, o.datasets, o.worst_pct, o.worst_id, o.worst_dataset);
}

nlohmann::json overall_json(const Overall& o) {
  using nlohmann::json;
  return json{{"predictions", o.predictions},
              {"datasets", o.datasets},
              {"mape_pct", o.predictions > 0 ? json(o.mape_pct) : json(nullptr)},
              {"worst_pct", o.predictions > 0 ? json(o.worst_pct) : json(nullptr)},
              {"worst_case", o.worst_id},
              {"worst_dataset", o.worst_dataset}};
}

/// A dataset's own chart: its predictions and its calibration cases against their measurements.
std::optional<Chart> dataset_chart(const DatasetResult& r) {
  Chart chart;
  chart.title = r.predictions > 0 ? fmt::format("{}: MAPE {:.1f}%, worst {:+.1f}%", r.name, r.mape_pct, r.worst_pct)
                                  : r.name;
  const bool one_unit = std::all_of(r.cases.begin(), r.cases.end(),
                                    [&](const CaseResult& c) { return c.unit == r.cases.front().unit; });
  chart.x = {one_unit && !r.cases.empty() && !r.cases.front().unit.empty()
                 ? fmt::format("measured ({})", r.cases.front().unit)
                 : std::string("measured (each case in its own unit)"),
             true,
             {}};
  chart.y = {"predicted", true, {}};
  Series predictions{fmt::format("{} predictions", r.predictions), {}, true};
  Series calibration{"calibration cases", {}, true};
  for (const CaseResult& c : r.cases) {
    if (!c.evaluated || !(c.predicted > 0.0) || !(c.measured > 0.0)) continue;
    (c.role == Role::prediction ? predictions : calibration).points.emplace_back(c.measured, c.predicted);
  }
  for (Series* s : {&predictions, &calibration}) {
    if (!s->points.empty()) chart.series.push_back(std::move(*s));
  }
  if (chart.series.empty()) return std::nullopt;
  chart.references = {{1.0, "predicted = measured"}, {1.1, "+10%"}, {0.9, "-10%"}};
  return chart;
}

}  // namespace

Overall overall(const std::vector<DatasetResult>& results, bool runs_only) {
  // From each dataset's summary (summarize): its count, MAPE and worst prediction.
  Overall o;
  double sum = 0.0;
  for (const DatasetResult& r : results) {
    if ((runs_only && !r.simulates_runs) || r.predictions == 0) continue;
    sum += r.mape_pct * r.predictions;
    if (o.datasets == 0 || std::abs(r.worst_pct) > std::abs(o.worst_pct)) {
      o.worst_pct = r.worst_pct;
      o.worst_id = r.worst_id;
      o.worst_dataset = r.name;
    }
    o.predictions += r.predictions;
    ++o.datasets;
  }
  o.mape_pct = o.predictions > 0 ? sum / o.predictions : 0.0;
  return o;
}

std::string suite_text(const std::vector<DatasetResult>& results) {
  std::string out;
  int passed = 0;
  std::vector<std::string> skipped;
  for (const DatasetResult& r : results) {
    if (verdict(r) == "skipped") {
      skipped.push_back(r.name);
    } else {
      passed += r.passed() ? 1 : 0;
    }
    out += fmt::format("== {}: {}; threshold {} (goal {}): {}\n", r.name, summary_text(r), threshold_text(r),
                       goal_text(r), verdict(r));
    out += fmt::format("   {}\n", r.file);
    if (!r.message.empty()) out += fmt::format("   {}\n", r.message);
    if (r.cases.empty()) continue;
    out += fmt::format("   {:<40} {:<11} {:>11} {:>11} {:>8}  {}\n", "case", "role", "predicted", "measured", "error", "unit / note");
    for (const CaseResult& c : r.cases) {
      if (c.evaluated) {
        out += fmt::format("   {:<40} {:<11} {:>11} {:>11} {:>+7.1f}%  {}; {}\n", c.id, to_string(c.role), number(c.predicted),
                           number(c.measured), c.error_pct, c.unit, c.note);
      } else {
        out += fmt::format("   {:<40} {:<11} {:>11} {:>11} {:>8}  {}\n", c.id, to_string(c.role), "-",
                           c.measured > 0 ? number(c.measured) : "-", "-", c.note);
      }
    }
  }
  out += fmt::format("overall, {}: {}\n", kRunsLabel, overall_text(overall(results, true)));
  out += fmt::format("overall, {}: {}\n", kAllLabel, overall_text(overall(results, false)));
  const int failed = static_cast<int>(results.size() - skipped.size()) - passed;
  out += fmt::format("{} datasets, {} passed, {} failed", results.size(), passed, failed);
  if (!skipped.empty()) {
    out += fmt::format(", {} skipped ({}: their data is absent, see each one's message)", skipped.size(),
                       fmt::join(skipped, ", "));
  }
  out += "\n";
  return out;
}

std::string suite_json(const std::vector<DatasetResult>& results) {
  using nlohmann::json;
  json doc = json::object();
  doc["datasets"] = json::array();
  for (const DatasetResult& r : results) {
    json d = {{"name", r.name},
              {"file", r.file},
              {"source", r.source},
              {"mape_pct", r.predictions > 0 ? json(r.mape_pct) : json(nullptr)},
              {"worst_pct", r.predictions > 0 ? json(r.worst_pct) : json(nullptr)},
              {"worst_case", r.worst_id},
              {"threshold_pct", r.threshold_pct ? json(*r.threshold_pct) : json(nullptr)},
              {"goal_pct", r.goal_pct},
              {"predictions", r.predictions},
              {"unsupported", r.unsupported},
              {"passed", r.passed()},
              {"message", r.message},
              {"cases", json::array()}};
    for (const CaseResult& c : r.cases) {
      d["cases"].push_back({{"id", c.id},
                            {"role", to_string(c.role)},
                            {"status", c.evaluated ? "evaluated" : "unsupported"},
                            {"predicted", c.evaluated ? json(c.predicted) : json(nullptr)},
                            {"measured", c.measured > 0 ? json(c.measured) : json(nullptr)},
                            {"unit", c.unit},
                            {"error_pct", c.evaluated ? json(c.error_pct) : json(nullptr)},
                            {"note", c.note}});
    }
    doc["datasets"].push_back(std::move(d));
  }
  doc["overall"] = {{"simulated_runs", overall_json(overall(results, true))},
                    {"all", overall_json(overall(results, false))}};
  return doc.dump(1) + "\n";
}

std::string suite_markdown(const std::vector<DatasetResult>& results, const std::string& plot_name) {
  std::string out = "# Validation report\n\nWritten by `foresight validate --markdown`; do not edit. Errors are "
                    "(predicted - measured) / measured. A dataset's MAPE and worst case are over its prediction "
                    "cases only; calibration cases fitted the constants in `validate/data/calibration.json`.\n\n";
  if (!plot_name.empty()) out += fmt::format("![predicted vs measured]({})\n\n", plot_name);
  out += "| dataset | predictions | MAPE | worst | threshold | goal | verdict |\n|---|---|---|---|---|---|---|\n";
  for (const DatasetResult& r : results) {
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", r.name, r.predictions,
                       r.predictions > 0 ? fmt::format("{:.1f}%", r.mape_pct) : "-",
                       r.predictions > 0 ? fmt::format("{:+.1f}% ({})", r.worst_pct, r.worst_id) : "-", threshold_text(r),
                       goal_text(r), verdict(r));
  }
  out += "\n| overall, prediction cases of | predictions | datasets | MAPE | worst |\n|---|---|---|---|---|\n";
  for (const auto& [label, runs_only] : {std::pair{kRunsLabel, true}, std::pair{kAllLabel, false}}) {
    const Overall o = overall(results, runs_only);
    out += fmt::format("| {} | {} | {} | {} | {} |\n", label, o.predictions, o.datasets,
                       o.predictions > 0 ? fmt::format("{:.1f}%", o.mape_pct) : "-",
                       o.predictions > 0 ? fmt::format("{:+.1f}% ({}, {})", o.worst_pct, o.worst_id, o.worst_dataset)
                                         : "-");
  }
  for (const DatasetResult& r : results) {
    out += fmt::format("\n## {}\n\n", r.name);
    // The trace datasets read the third-party folder (--traces), which is where the reader has it.
    const bool traces = r.name.starts_with("trace_") || r.name == "execution_traces";
    if (!traces) out += fmt::format("File: `{}`\n\n", r.file);
    if (!r.source.empty()) out += fmt::format("Source: {}\n\n", r.source);
    if (!r.message.empty()) out += fmt::format("{}\n\n", r.message);
    if (r.cases.empty()) continue;
    out += "| case | role | predicted | measured | unit | error | note |\n|---|---|---|---|---|---|---|\n";
    for (const CaseResult& c : r.cases) {
      out += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", c.id, to_string(c.role),
                         c.evaluated ? number(c.predicted) : "-", c.measured > 0 ? number(c.measured) : "-", c.unit,
                         c.evaluated ? fmt::format("{:+.1f}%", c.error_pct) : "-", c.note);
    }
  }
  return out;
}

std::string suite_svg(const std::vector<DatasetResult>& results) {
  Chart chart;
  chart.title = "predicted vs measured (each case in its own unit)";
  chart.x = {"measured", true, {}};
  chart.y = {"predicted", true, {}};
  Series calibration{"calibration cases (all datasets)", {}, true};
  for (const DatasetResult& r : results) {
    Series s{fmt::format("{} (MAPE {:.1f}%)", r.name, r.mape_pct), {}, true};
    for (const CaseResult& c : r.cases) {
      if (!c.evaluated || !(c.predicted > 0.0) || !(c.measured > 0.0)) continue;
      (c.role == Role::prediction ? s : calibration).points.emplace_back(c.measured, c.predicted);
    }
    if (!s.points.empty()) chart.series.push_back(std::move(s));
  }
  if (!calibration.points.empty()) chart.series.push_back(std::move(calibration));
  chart.references = {{1.0, "predicted = measured"}, {1.1, "+10%"}, {0.9, "-10%"}};
  std::vector<Chart> charts{std::move(chart)};
  for (const DatasetResult& r : results) {
    if (auto c = dataset_chart(r)) charts.push_back(std::move(*c));
  }
  return svg_charts("Foresight validation: predictions against measured runs", charts, 4);
}

}  // namespace foresight::validate
