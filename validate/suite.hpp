#pragma once
/// The validation suite: every measured dataset of validate/data, listed with its goal and its
/// threshold in validate/data/suite.json, predicted with the stored calibration and compared case
/// by case. Also the refit of that calibration from the datasets' calibration cases.
///
/// A dataset's error is the mean absolute error % (MAPE) of its evaluated prediction cases;
/// calibration cases are shown but never counted. A dataset passes when it has a threshold and
/// its MAPE is at or below it, or when it has none (it is reported, e.g. while unsupported).

#include <optional>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "net/network_model.hpp"
#include "validate/calibration.hpp"

namespace foresight::validate {

enum class DatasetKind : std::uint8_t {
  thetagpu_ddp,
  thetagpu_gpipe,
  nccl_busbw,
  gemm_and_memory,
  megatron_sc21,
  gpu_steps_analytical,
  gpu_steps_profile,
  gpu_steps_replay,
  kernel_sweep_gemm,
  kernel_sweep_attention,
  kernel_sweep_conv,
  kernel_sweep_memory,
  published_runs
};

/// One dataset of the manifest.
struct DatasetEntry {
  std::string name;
  DatasetKind kind = DatasetKind::thetagpu_ddp;
  std::string file;  ///< absolute, resolved against the manifest's folder
  double goal_pct = 0.0;
  std::optional<double> threshold_pct;  ///< none: reported only
};

struct Suite {
  std::string path;  ///< the manifest
  std::vector<DatasetEntry> datasets;
};

/// Reads a manifest; ConfigError naming file, pointer, expected and found otherwise (unknown
/// keys or kinds, a negative goal or threshold, a repeated name, a missing dataset file).
Suite load_suite(const std::string& path);
/// data_dir()/suite.json.
std::string default_suite_path();
/// The folder of the measured traces: <shared>/validation/traces, <shared> being the Meson
/// option shared_dir (default: a folder named shared beside the source tree).
std::string default_traces_dir();

/// The suite with only the datasets `only` names (all when empty), less those `skip` names, in
/// the manifest's order. An unknown name is a ConfigError "`what`: expected a dataset of
/// <manifest> (<its names>), found \"<name>\"".
Suite select_datasets(Suite suite, const std::vector<std::string>& only, const std::vector<std::string>& skip,
                      std::string_view what);

/// Every case id the suite's datasets declare, with its role (for check_provenance).
CaseRoles case_roles(const Suite& suite);

struct CaseResult {
  std::string id;
  Role role = Role::prediction;
  bool evaluated = false;  ///< false: unsupported, `note` says why
  double predicted = 0.0;
  double measured = 0.0;
  std::string unit;
  double error_pct = 0.0;  ///< (predicted - measured) / measured x 100
  std::string note;        ///< e.g. the collective algorithm, or what is missing
};

struct DatasetResult {
  std::string name;
  std::string file;
  std::string source;
  double goal_pct = 0.0;
  std::optional<double> threshold_pct;
  std::vector<CaseResult> cases;
  std::string message;  ///< e.g. "skipped: ... absent"
  /// Its cases are whole training iterations, steps or runs simulated from a scenario (not
  /// kernels, collectives, or replayed traces): the datasets the overall scenario figure pools.
  bool simulates_runs = false;
  // Over evaluated prediction cases:
  int predictions = 0;
  double mape_pct = 0.0;
  double worst_pct = 0.0;  ///< signed error of the worst case
  std::string worst_id;
  int unsupported = 0;

  /// Threshold met (or none set); a threshold with no evaluated prediction fails.
  bool passed() const;
};

struct ValidateOptions {
  std::string traces_dir;  ///< empty: no trace cases
  sim::NetworkKind network = sim::NetworkKind::flow;
  /// Called with each dataset's result as soon as it is known (progress); may be empty.
  std::function<void(const DatasetResult&)> on_dataset;
};

/// The datasets run_suite adds when it has a traces folder: trace replay, trace retiming and
/// execution traces.
inline constexpr std::size_t kTraceDatasets = 3;

/// Predicts every case of every dataset with `calibration` (checked first: provenance and the
/// compute model's constants), then the trace-replay cases.
std::vector<DatasetResult> run_suite(const Suite& suite, const Calibration& calibration, const std::string& calibration_path,
                                     const ValidateOptions& options);

/// Refits every constant on the calibration cases only: collectives, then compute, then the
/// ThetaGPU input rate (with the new collectives), then the GPipe constants (with that rate).
Calibration calibrate(const Suite& suite);

/// Fills a result's summary (predictions, MAPE, worst, unsupported) from its cases.
void summarize(DatasetResult& r);

}  // namespace foresight::validate
