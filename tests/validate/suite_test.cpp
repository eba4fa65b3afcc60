// The validation suite runner: the stored calibration passes every threshold, a planted wrong
// measurement fails its dataset, a calibration that names a prediction case (or drifts from the
// compute model) is rejected, malformed files are clear errors, and the reports carry the keys.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "common/error.hpp"
#include "validate/megatron_dataset.hpp"
#include "validate/suite.hpp"
#include "validate/suite_report.hpp"

using namespace foresight;
using Catch::Matchers::Contains;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const validate::Suite& suite() {
  static const auto s = validate::load_suite(validate::default_suite_path());
  return s;
}

const validate::Calibration& stored() {
  static const auto c = run::load_calibration(run::default_calibration_path());
  return c;
}

validate::ValidateOptions no_traces() { return {}; }

const std::vector<validate::DatasetResult>& results() {
  static const auto r = validate::run_suite(suite(), stored(), run::default_calibration_path(), no_traces());
  return r;
}

const validate::DatasetResult& dataset(const std::vector<validate::DatasetResult>& rs, const std::string& name) {
  for (const auto& r : rs) {
    if (r.name == name) return r;
  }
  throw std::runtime_error("no dataset " + name);
}

std::string bad(const std::string& name) {
  return std::string(std::getenv("FORESIGHT_TEST_DATA")) + "/bad/validate/" + name;
}

/// A scratch folder for this process.
fs::path scratch() {
  const fs::path dir = fs::temp_directory_path() / ("foresight-suite-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const json& doc) { std::ofstream(path) << doc.dump(1) << "\n"; }

}  // namespace

TEST_CASE("the stored calibration passes every dataset's threshold; MAPE and worst are over predictions", "[validate]") {
  REQUIRE(results().size() == suite().datasets.size());
  for (const auto& r : results()) {
    INFO(r.name << ": MAPE " << r.mape_pct << "%, threshold " << r.threshold_pct.value_or(-1));
    REQUIRE(r.passed());
    // Recompute the summary from the cases: calibration and unsupported cases never count.
    double sum = 0.0, worst = 0.0;
    int n = 0;
    for (const auto& c : r.cases) {
      if (!c.evaluated || c.role != validate::Role::prediction) continue;
      REQUIRE(c.error_pct == Approx((c.predicted - c.measured) / c.measured * 100.0));
      sum += std::abs(c.error_pct);
      worst = std::max(worst, std::abs(c.error_pct));
      ++n;
    }
    REQUIRE(r.predictions == n);
    if (n > 0) {
      REQUIRE(r.mape_pct == Approx(sum / n));
      REQUIRE(std::abs(r.worst_pct) == Approx(worst));
    }
  }
  REQUIRE(dataset(results(), "thetagpu_resnet18_ddp").predictions == 2);
  REQUIRE(dataset(results(), "thetagpu_resnet18_gpipe").predictions == 2);
  REQUIRE(dataset(results(), "nccl_busbw").predictions == 41);
  // Megatron's rows: all 10 are simulated (the large ones fold to one rank per stage); one is
  // the calibration row.
  const auto& m = dataset(results(), "megatron_sc21_table1");
  REQUIRE(m.cases.size() == 10);
  REQUIRE(m.predictions == 9);
  REQUIRE(m.cases[0].role == validate::Role::calibration);
  REQUIRE(m.unsupported == 0);
  REQUIRE_THAT(m.cases[9].note, Contains("tp 8 x pp 64 x dp 6"));
  REQUIRE_THAT(m.cases[3].note, Contains("tp 8 x pp 1 x dp 32"));
}

TEST_CASE("a planted wrong measurement fails its dataset", "[validate]") {
  const fs::path dir = scratch();
  json theta = json::parse(std::ifstream(validate::data_dir() + "/thetagpu_resnet18_cifar100.json"));
  theta["scenario"]["ddp"] = (fs::path(validate::data_dir()).parent_path().parent_path() / "examples/thetagpu-resnet18-ddp.json").string();
  theta["scenario"]["gpipe"] = (fs::path(validate::data_dir()).parent_path().parent_path() / "examples/thetagpu-resnet18-gpipe.json").string();
  for (auto& run : theta["runs"]) {
    if (run["id"] == "ddp-6gpu") run["time_s"] = run["time_s"].get<double>() * 1.5;  // 83 s -> 124.5 s
  }
  write(dir / "planted.json", theta);
  write(dir / "suite.json", json{{"description", "planted"},
                                 {"datasets", {{{"name", "planted_ddp"}, {"kind", "thetagpu_ddp"}, {"file", "planted.json"},
                                                {"goal_pct", 10}, {"threshold_pct", 10}}}}});
  const auto planted = validate::load_suite((dir / "suite.json").string());
  const auto rs = validate::run_suite(planted, stored(), run::default_calibration_path(), no_traces());
  REQUIRE(rs.size() == 1);
  const auto& r = rs[0];
  REQUIRE(!r.passed());
  REQUIRE(r.worst_id == "ddp-6gpu");
  // The model still predicts ~82 s: -34% against the planted 124.5 s.
  REQUIRE(r.worst_pct == Approx((1.0 / 1.5 - 1.0) * 100.0 + dataset(results(), "thetagpu_resnet18_ddp").cases[2].error_pct / 1.5).margin(0.1));
  REQUIRE_THAT(validate::suite_text(rs), Contains("FAIL") && Contains("0 passed, 1 failed"));
  fs::remove_all(dir);
}

TEST_CASE("a calibration that reads a prediction case, or drifts from the code, is rejected", "[validate]") {
  const auto roles = validate::case_roles(suite());
  REQUIRE(roles.at("ddp-4gpu").role == validate::Role::prediction);
  REQUIRE(roles.at("ddp-2gpu").role == validate::Role::calibration);
  // The stored file names only calibration cases.
  REQUIRE_NOTHROW(validate::check_provenance(stored(), roles, "calibration.json"));
  const auto reads = run::load_calibration(bad("calibration_reads_prediction.json"));
  REQUIRE_THROWS_WITH(validate::run_suite(suite(), reads, "reads.json", no_traces()),
                      Contains("reads.json: /thetagpu_ddp/fitted_on/1") && Contains("\"ddp-4gpu\", a prediction case"));
  const auto unknown = run::load_calibration(bad("calibration_unknown_case.json"));
  REQUIRE_THROWS_WITH(validate::check_provenance(unknown, roles, "u.json"),
                      Contains("/thetagpu_gpipe/fitted_on/0") && Contains("\"gpipe-3gpu\", which no dataset declares"));
  const auto drift = run::load_calibration(bad("calibration_compute_drift.json"));
  REQUIRE_THROWS_WITH(validate::check_compute_constants(drift, "d.json"),
                      Contains("d.json: /compute/0: gemm_cap 0.9") && Contains("models/compute_model.cpp"));
  // The compute constants the fit gives are the stored ones, and the code's.
  const auto fitted = validate::fit_compute(validate::load_gemm_dataset(validate::data_dir() + "/gemm_and_memory.json"));
  REQUIRE(fitted.size() == stored().compute.size());
  for (std::size_t i = 0; i < fitted.size(); ++i) {
    REQUIRE(fitted[i].gemm_cap == Approx(stored().compute[i].gemm_cap).epsilon(1e-12));
    REQUIRE(fitted[i].hbm_fraction == Approx(stored().compute[i].hbm_fraction).epsilon(1e-12));
    REQUIRE(fitted[i].fitted_on == stored().compute[i].fitted_on);
  }
  REQUIRE_NOTHROW(validate::check_compute_constants(stored(), "calibration.json"));
}

TEST_CASE("malformed suite, dataset and calibration files are clear errors", "[validate]") {
  REQUIRE_THROWS_WITH(validate::load_suite(bad("suite_unknown_key.json")),
                      Contains("suite_unknown_key.json") && Contains("/datasets/0/colour") && Contains("unknown key"));
  REQUIRE_THROWS_WITH(validate::load_suite(bad("suite_bad_kind.json")),
                      Contains("/datasets/0/kind") && Contains("found \"thetagpu\""));
  REQUIRE_THROWS_WITH(validate::load_suite(bad("suite_missing_file.json")),
                      Contains("/datasets/0/file") && Contains("missing.json"));
  REQUIRE_THROWS_WITH(validate::load_suite(bad("suite_threshold_above_goal.json")),
                      Contains("/datasets/0/threshold_pct") && Contains("at most the goal (10%), found 20%"));
  REQUIRE_THROWS_WITH(validate::load_megatron_dataset(bad("megatron_four_calibration.json")),
                      Contains("/runs/3/role") && Contains("at most 3 calibration rows"));
  REQUIRE_THROWS_WITH(validate::load_thetagpu_dataset(bad("thetagpu_bad_strategy.json")),
                      Contains("/runs/2/strategy") && Contains("found \"zero3\""));
  REQUIRE_THROWS_WITH(run::load_calibration(bad("calibration_unknown_key.json")),
                      Contains("/thetagpu_ddp/input_rate_typo") && Contains("unknown key"));
  REQUIRE_THROWS_AS(validate::load_suite(bad("no_such_suite.json")), sim::ConfigError);
}

TEST_CASE("reports: JSON keys of docs/architecture.md, Markdown tables and an SVG scatter", "[validate]") {
  const json doc = json::parse(validate::suite_json(results()));
  REQUIRE(doc.at("datasets").size() == results().size());
  for (const auto& d : doc.at("datasets")) {
    for (const char* key : {"name", "mape_pct", "worst_pct", "threshold_pct", "cases"}) REQUIRE(d.contains(key));
    for (const auto& c : d.at("cases")) {
      for (const char* key : {"id", "role", "predicted", "measured", "error_pct"}) REQUIRE(c.contains(key));
    }
  }
  const auto& ddp = doc.at("datasets").at(0);
  REQUIRE(ddp.at("name") == "thetagpu_resnet18_ddp");
  REQUIRE(ddp.at("mape_pct").get<double>() == Approx(results()[0].mape_pct));
  const std::string md = validate::suite_markdown(results(), "validation.svg");
  REQUIRE_THAT(md, Contains("![predicted vs measured](validation.svg)") && Contains("| nccl_busbw | 41 |") &&
                       Contains("## megatron_sc21_table1"));
  const std::string svg = validate::suite_svg(results());
  REQUIRE(svg.rfind("<?xml", 0) == 0);
  REQUIRE_THAT(svg, Contains("gemm_and_memory") && Contains("+10%") && Contains("-10%"));
  // The pooled figures: JSON, text and Markdown carry both.
  for (const char* pool : {"simulated_runs", "all"}) {
    const auto& o = doc.at("overall").at(pool);
    for (const char* key : {"predictions", "datasets", "mape_pct", "worst_pct", "worst_case", "worst_dataset"}) {
      REQUIRE(o.contains(key));
    }
  }
  const validate::Overall runs = validate::overall(results(), true);
  REQUIRE(doc.at("overall").at("simulated_runs").at("predictions") == runs.predictions);
  REQUIRE_THAT(validate::suite_text(results()),
               Contains(fmt::format("overall, training runs simulated from a scenario: MAPE {:.1f}% over {} prediction "
                                    "cases of {} datasets",
                                    runs.mape_pct, runs.predictions, runs.datasets)));
  REQUIRE_THAT(md, Contains("| training runs simulated from a scenario | " + std::to_string(runs.predictions) + " |"));
  // A chart of its own for every dataset with a measured case, after the one of them all.
  std::size_t charted = 0;
  for (const auto& r : results()) {
    const bool any = std::any_of(r.cases.begin(), r.cases.end(),
                                 [](const validate::CaseResult& c) { return c.evaluated && c.measured > 0.0; });
    charted += any ? 1 : 0;
    if (any && r.predictions > 0) REQUIRE_THAT(svg, Contains(fmt::format("{}: MAPE {:.1f}%", r.name, r.mape_pct)));
  }
  REQUIRE(charted >= 20);
  std::size_t charts = 0;
  for (auto at = svg.find("class=\"chart\" data-chart="); at != std::string::npos;
       at = svg.find("class=\"chart\" data-chart=", at + 1)) {
    ++charts;
  }
  REQUIRE(charts == charted + 1);
}

TEST_CASE("overall: the prediction cases pooled, over every dataset or the simulated runs", "[validate]") {
  // Three datasets: two simulate runs, one is a kernel sweep; calibration and unsupported cases
  // do not count.
  const auto made = [](std::string name, bool runs, std::vector<std::pair<double, validate::Role>> errors) {
    validate::DatasetResult r;
    r.name = std::move(name);
    r.simulates_runs = runs;
    int k = 0;
    for (const auto& [error, role] : errors) {
      validate::CaseResult c;
      c.id = r.name + "-" + std::to_string(k++);
      c.role = role;
      c.evaluated = true;
      c.error_pct = error;
      c.measured = 1.0;
      c.predicted = 1.0 + error / 100.0;
      r.cases.push_back(c);
    }
    validate::CaseResult unsupported;
    unsupported.id = "missing";
    r.cases.push_back(unsupported);
    validate::summarize(r);
    return r;
  };
  using validate::Role;
  const std::vector<validate::DatasetResult> rs{
      made("a", true, {{+4.0, Role::prediction}, {-8.0, Role::prediction}, {-50.0, Role::calibration}}),
      made("b", false, {{+30.0, Role::prediction}}),
      made("c", true, {{-2.0, Role::prediction}})};
  const validate::Overall runs = validate::overall(rs, true);
  CHECK(runs.predictions == 3);
  CHECK(runs.datasets == 2);
  CHECK(runs.mape_pct == Approx((4.0 + 8.0 + 2.0) / 3.0));
  CHECK(runs.worst_pct == -8.0);
  CHECK(runs.worst_id == "a-1");
  CHECK(runs.worst_dataset == "a");
  const validate::Overall all = validate::overall(rs, false);
  CHECK(all.predictions == 4);
  CHECK(all.datasets == 3);
  CHECK(all.mape_pct == Approx((4.0 + 8.0 + 30.0 + 2.0) / 4.0));
  CHECK(all.worst_pct == 30.0);
  CHECK(all.worst_dataset == "b");
  CHECK(validate::overall({}, false).predictions == 0);
}

TEST_CASE("trace replay cases: skipped with a message when the folder is absent", "[validate]") {
  validate::ValidateOptions o;
  o.traces_dir = "/nonexistent/traces";
  validate::Suite none;
  none.path = "empty";
  const auto rs = validate::run_suite(none, stored(), run::default_calibration_path(), o);
  REQUIRE(rs.size() == 3);
  REQUIRE(rs[0].name == "trace_replay");
  REQUIRE(rs[1].name == "trace_retime");
  REQUIRE(rs[2].name == "execution_traces");
  for (const auto& r : rs) {
    REQUIRE(r.cases.empty());
    REQUIRE_THAT(r.message, Contains("skipped: /nonexistent/traces") && Contains("is absent"));
    REQUIRE(r.passed());
  }
  // Counted as skipped, not as passed.
  REQUIRE_THAT(validate::suite_text(rs),
               Contains("3 datasets, 0 passed, 0 failed, 3 skipped (trace_replay, trace_retime, execution_traces: their data is "
                        "absent"));
}
