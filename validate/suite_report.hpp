#pragma once
/// The validation suite's results for people and programs: a text table, JSON (docs/architecture.md's keys:
/// {"datasets": [{"name", "mape_pct", "worst_pct", "threshold_pct", "cases": [{"id", "role",
/// "predicted", "measured", "error_pct"}]}]}, plus more), a Markdown report and an SVG scatter of
/// predicted vs measured (log axes, the diagonal and +-10% bands), all with the overall MAPE.

#include <string>
#include <vector>

#include "validate/suite.hpp"

namespace foresight::validate {

/// The prediction cases of several datasets pooled: how many, from how many datasets, their
/// MAPE, and the worst one (signed error, case and dataset).
struct Overall {
  int predictions = 0;
  int datasets = 0;
  double mape_pct = 0.0;
  double worst_pct = 0.0;
  std::string worst_id;
  std::string worst_dataset;
};
/// Over every evaluated prediction case of `results` (summarized: validate::summarize), or
/// (`runs_only`) of the datasets that simulate whole training iterations, steps or runs from a
/// scenario (DatasetResult::simulates_runs).
Overall overall(const std::vector<DatasetResult>& results, bool runs_only);

/// Per dataset a header (file, MAPE and worst over predictions, threshold, verdict) and a row
/// per case; then the two overall lines (every prediction, and the simulated runs); a last line
/// "N datasets, N passed, N failed".
std::string suite_text(const std::vector<DatasetResult>& results);
/// The datasets, and "overall": {"all", "simulated_runs"}, each {"predictions", "datasets",
/// "mape_pct", "worst_pct", "worst_case", "worst_dataset"}.
std::string suite_json(const std::vector<DatasetResult>& results);
/// A summary table (one row per dataset) and the overall rows, then a table of cases per
/// dataset; links `plot_name`.
std::string suite_markdown(const std::vector<DatasetResult>& results, const std::string& plot_name);
/// Every evaluated case, predictions per dataset and all calibration cases as one more series;
/// then a chart per dataset (its predictions and its calibration cases), four charts a row.
std::string suite_svg(const std::vector<DatasetResult>& results);

}  // namespace foresight::validate
