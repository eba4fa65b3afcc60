// foresight validate: every measured dataset against its prediction, with the stored calibration
// (or a refit of it with --calibrate), reported as text or JSON, Markdown and an SVG plot; exit 1
// when a dataset's error exceeds its threshold.
#include <fmt/format.h>

#include <chrono>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.hpp"
#include "validate/suite_report.hpp"

namespace foresight::cli {
namespace {

struct ValidateCliOptions {
  std::string suite;
  std::string calibration;
  bool calibrate = false;
  std::string traces;
  bool no_traces = false;
  bool json = false;
  std::string output;
  std::string markdown;
  std::string plot;
  std::string network = "flow";
  std::vector<std::string> only;  ///< dataset names to keep (empty: all)
  std::vector<std::string> skip;  ///< dataset names to leave out
};

int run_validate(const ValidateCliOptions& o) {
  const std::string suite_path = o.suite.empty() ? validate::default_suite_path() : o.suite;
  const std::string cal_path = o.calibration.empty() ? run::default_calibration_path() : o.calibration;
  const validate::Suite whole = validate::load_suite(suite_path);
  const validate::Suite suite = validate::select_datasets(whole, o.only, o.skip, o.only.empty() ? "--skip" : "--only");
  validate::Calibration calibration;
  if (o.calibrate) {
    // The refit takes every calibration case of the whole suite; --only and --skip choose what
    // is validated after it.
    std::fputs("foresight validate: refitting every constant on the calibration cases...\n", stderr);
    calibration = validate::calibrate(whole);
    emit(cal_path, run::to_json_text(calibration));
    fmt::print(stderr, "foresight validate: wrote {}\n", cal_path);
  } else {
    calibration = run::load_calibration(cal_path);
  }
  validate::ValidateOptions options;
  options.network = sim::parse_network_kind(o.network, "--network");
  if (!o.no_traces) options.traces_dir = o.traces.empty() ? validate::default_traces_dir() : o.traces;
  const std::size_t total = suite.datasets.size() + (options.traces_dir.empty() ? 0 : validate::kTraceDatasets);
  std::size_t done = 0;
  auto last = std::chrono::steady_clock::now();
  options.on_dataset = [&](const validate::DatasetResult& r) {
    const auto now = std::chrono::steady_clock::now();
    const double took = std::chrono::duration<double>(now - last).count();
    last = now;
    const std::string what = r.predictions > 0 ? fmt::format("MAPE {:.1f}% over {} predictions", r.mape_pct, r.predictions)
                                               : (r.message.empty() ? std::string("no prediction") : r.message);
    fmt::print(stderr, "validate: [{}/{}] {}: {} ({:.1f} s)\n", ++done, total, r.name, what, took);
  };
  const auto results = validate::run_suite(suite, calibration, cal_path, options);
  Outputs out;
  if (!o.plot.empty()) out.emit(o.plot, validate::suite_svg(results));
  if (!o.markdown.empty()) {
    std::string link;
    if (!o.plot.empty()) {
      const auto md_dir = std::filesystem::absolute(o.markdown).parent_path();
      link = std::filesystem::absolute(o.plot).lexically_relative(md_dir).generic_string();
    }
    out.emit(o.markdown, validate::suite_markdown(results, link));
  }
  out.emit(o.output, o.json ? validate::suite_json(results) : validate::suite_text(results));
  out.commit();
  std::string failed;
  for (const auto& r : results) {
    if (!r.passed()) failed += fmt::format("{}{} (MAPE {:.1f}% > {:g}%)", failed.empty() ? "" : ", ", r.name, r.mape_pct,
                                           r.threshold_pct.value_or(0.0));
  }
  if (!failed.empty()) {
    fmt::print(stderr, "foresight: validation failed: {}\n", failed);
    return 1;
  }
  return 0;
}

}  // namespace

void add_validate_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<ValidateCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "Predict every measured case of validate/data; exit 1 when a dataset exceeds its threshold");
  cmd->add_flag("--calibrate", o->calibrate,
                "Refit every constant on the calibration cases of the whole suite, write the calibration file, then "
                "validate (the datasets --only or --skip choose)");
  cmd->add_option("--suite", o->suite, "Suite manifest (default: validate/data/suite.json)");
  cmd->add_option("--calibration", o->calibration, "Calibration file (default: validate/data/calibration.json)");
  cmd->add_option("--traces", o->traces, "Folder of third-party measured traces (default: validation/traces under the build's shared_dir option; cases whose traces are absent are skipped)");
  cmd->add_flag("--no-traces", o->no_traces, "Leave out the trace-replay cases");
  cmd->add_flag("--json", o->json, "Print the results as JSON (keys in docs/usage.md)");
  cmd->add_option("-o,--output", o->output, "Write the results to this file (atomically) instead of standard output");
  cmd->add_option("--markdown", o->markdown, "Also write a Markdown report to this file");
  cmd->add_option("--plot", o->plot, "Also write an SVG scatter of predicted vs measured to this file");
  cmd->add_option("--network", o->network, "Network model: flow or analytical")->capture_default_str();
  auto* only = cmd->add_option("--only", o->only, "Run only these datasets of the suite (names, comma-separated)")
                   ->delimiter(',');
  cmd->add_option("--skip", o->skip, "Leave out these datasets of the suite (names, comma-separated)")
      ->delimiter(',')
      ->excludes(only);
  cmd->callback([o, &run] { run = [o] { return run_validate(*o); }; });
}

}  // namespace foresight::cli
