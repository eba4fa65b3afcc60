#pragma once
/// Fitting the collective calibration on the dataset's calibration cases, and predicting every
/// case. A prediction case never feeds a constant: the fit sees only points whose role is
/// calibration, and it runs the simulator itself (plan + engine) on them, so the constants are
/// those of the model that makes the predictions.

#include <string>
#include <vector>

#include "net/network_model.hpp"
#include "validate/nccl_dataset.hpp"
#include "run/calibration.hpp"

namespace foresight::validate {

using run::CalibrationFile;
using run::CalibrationRecord;
using run::collective_config;

/// Fits one profile on the calibration points of series `series_id`: launch overhead, latency
/// scale and the efficiency of every NCCL protocol those points exercise (the others stay 1,
/// NCCL's own model), by Levenberg-Marquardt on relative time errors (Eigen's MINPACK port),
/// in log space so every constant stays positive. ConfigError when the series has fewer
/// calibration points than constants.
CalibrationRecord fit_series(const NcclDataset& dataset, const std::string& series_id);

/// One profile per series that has calibration points.
CalibrationFile fit_dataset(const NcclDataset& dataset);

struct PointResult {
  const NcclPoint* point = nullptr;
  double predicted_busbw_GBps = 0.0;
  double error_pct = 0.0;  ///< (predicted - measured) / measured x 100
  std::string algorithm;
  std::string protocol;
};

/// Simulates every point of `dataset` with `config` on a `network` model.
std::vector<PointResult> evaluate(const NcclDataset& dataset, const sim::CollectiveConfig& config,
                                  sim::NetworkKind network);

}  // namespace foresight::validate
