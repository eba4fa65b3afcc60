#pragma once
/// The collective part of the stored calibration ("collectives" in validate/data/calibration.json):
/// for each GPU generation, the constants of sim::CollectiveCalibration, and the measured cases
/// they were fitted on. `foresight validate --calibrate` refits and rewrites it; tests check that
/// the stored values are what the fit gives.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/collective_config.hpp"
#include "topologies/json_reader.hpp"

namespace foresight::validate {

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

}  // namespace foresight::validate
