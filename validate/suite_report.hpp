#pragma once
/// The validation suite's results for people and programs: a text table, JSON (docs/architecture.md's keys:
/// {"datasets": [{"name", "mape_pct", "worst_pct", "threshold_pct", "cases": [{"id", "role",
/// "predicted", "measured", "error_pct"}]}]}, plus more), a Markdown report and an SVG scatter of
/// predicted vs measured (log axes, the diagonal and +-10% bands).

#include <string>
#include <vector>

#include "validate/suite.hpp"

namespace foresight::validate {

/// Per dataset a header (file, MAPE and worst over predictions, threshold, verdict) and a row
/// per case; a last line "N datasets, N passed, N failed".
std::string suite_text(const std::vector<DatasetResult>& results);
std::string suite_json(const std::vector<DatasetResult>& results);
/// A summary table (one row per dataset), then a table of cases per dataset; links `plot_name`.
std::string suite_markdown(const std::vector<DatasetResult>& results, const std::string& plot_name);
/// Every evaluated case, predictions per dataset and all calibration cases as one more series.
std::string suite_svg(const std::vector<DatasetResult>& results);

}  // namespace foresight::validate
