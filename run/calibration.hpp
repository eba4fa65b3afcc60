#pragma once
/// The stored calibration (validate/data/calibration.json, shipped with the repository): every
/// constant the simulator cannot know, its value, and the measured calibration cases it was fitted
/// on. This is the reading side, which `simulate`, `sweep`, `collective` and `replay` need; fitting
/// and the provenance checks are validate/calibration.hpp's. Parts:
/// - "collectives": per GPU generation, NCCL launch, latency scale, protocol efficiencies;
/// - "compute": per GPU generation, the GEMM cap and the achievable HBM fraction;
/// - "thetagpu_ddp": the per-process input rate;
/// - "thetagpu_gpipe": torchgpipe's per-task bookkeeping and GIL-held dispatch;
/// - "megatron_sc21": Megatron's matrix-kernel efficiency relative to the cuBLASLt benchmark.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collectives/collective_config.hpp"
#include "common/json_reader.hpp"
#include "common/units.hpp"

namespace foresight::run {

/// One GPU generation's collective constants and the measured cases they were fitted on.
struct CalibrationRecord {
  int compute_capability = 0;
  sim::CollectiveCalibration calibration;
  std::vector<std::string> fitted_on;  ///< ids of the calibration cases
};

struct CalibrationFile {
  std::vector<CalibrationRecord> profiles;
};

/// Reads the collective part `value` (at `at`) of a calibration file read by `r`; ConfigError
/// naming file, pointer, expected and found otherwise.
CalibrationFile parse_collective_calibration(const topo::JsonReader& r, const nlohmann::json& value,
                                             const topo::JsonPath& at);
/// The collective part as JSON.
nlohmann::json to_json(const CalibrationFile& file);

/// A collective configuration using `file`'s profiles (NCCL's uncalibrated model elsewhere).
sim::CollectiveConfig collective_config(const CalibrationFile& file);

/// The compute model's fitted constants for one GPU generation (models/compute_model.cpp
/// carries the same values; check_compute_constants compares them).
struct ComputeCalibration {
  int compute_capability = 0;
  std::string gpu;  ///< the catalog GPU the cases were measured on
  double gemm_cap = 0.0;
  double hbm_fraction = 0.0;
  std::vector<std::string> fitted_on;
};

/// The fitted constant and the cases it came from (the "thetagpu_ddp" part of calibration.json).
struct DdpCalibration {
  double input_rate = 0.0;  ///< samples/s per process
  std::vector<std::string> fitted_on;
};

/// The fitted GPipe constants and the cases they came from ("thetagpu_gpipe" in calibration.json).
struct GpipeCalibration {
  sim::Time microbatch_overhead;
  sim::Time dispatch_gil;
  std::vector<std::string> fitted_on;
};

/// The fitted constant and the rows it came from ("megatron_sc21" in calibration.json).
struct MegatronCalibration {
  double gemm_efficiency = 1.0;
  std::vector<std::string> fitted_on;
};

struct Calibration {
  CalibrationFile collectives;
  std::vector<ComputeCalibration> compute;
  DdpCalibration thetagpu_ddp;
  GpipeCalibration thetagpu_gpipe;
  MegatronCalibration megatron;
};

/// Reads a calibration file; ConfigError naming file, pointer, expected and found otherwise.
Calibration load_calibration(const std::string& path);
/// The file's JSON text (with each part's method).
std::string to_json_text(const Calibration& c);

/// Path of the stored calibration: $FORESIGHT_DATA/calibration.json when that variable is set,
/// else the repository's validate/data/calibration.json.
std::string default_calibration_path();
/// The collective configuration of the stored calibration.
sim::CollectiveConfig default_collective_config();

}  // namespace foresight::run
