#pragma once
/// The stored collective calibration (validate/data/collective_calibration.json): for each GPU
/// generation, the constants of sim::CollectiveCalibration, and the measured cases they were
/// fitted on. `foresight calibrate-collectives` refits and rewrites it; tests check that the
/// stored values are what the fit gives.

#include <string>
#include <vector>

#include "sim/collective_config.hpp"

namespace foresight::validate {

struct CalibrationRecord {
  int compute_capability = 0;
  sim::CollectiveCalibration calibration;
  std::vector<std::string> fitted_on;  ///< ids of the calibration cases
};

struct CalibrationFile {
  std::vector<CalibrationRecord> profiles;
};

/// Reads a calibration file; ConfigError naming file, pointer, expected and found otherwise.
CalibrationFile load_calibration(const std::string& path);
/// The file's JSON text.
std::string to_json_text(const CalibrationFile& file);

/// A collective configuration using `file`'s profiles (NCCL's uncalibrated model elsewhere).
sim::CollectiveConfig collective_config(const CalibrationFile& file);
/// Path of the stored calibration: data_dir()/collective_calibration.json.
std::string default_calibration_path();
/// collective_config(load_calibration(default_calibration_path())).
sim::CollectiveConfig default_collective_config();

}  // namespace foresight::validate
