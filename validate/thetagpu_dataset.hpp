#pragma once
/// The ThetaGPU ResNet-18 / CIFAR-100 runs (validate/data/thetagpu_resnet18_cifar100.json) and the
/// data-parallel check: the per-process input-pipeline rate, which the paper does not state, is
/// fitted on the calibration rows (2 and 8 GPUs) only; the 4- and 6-GPU rows are predictions.

#include <string>
#include <vector>

#include "strategies/simulation.hpp"
#include "validate/nccl_dataset.hpp"

namespace foresight::validate {

struct ThetaRun {
  std::string id;
  std::string strategy;  ///< "data_parallel" or "pipeline_gpipe"
  int gpus = 0;
  double time_s = 0.0;   ///< measured 10-epoch wall time
  Role role = Role::prediction;
};

struct ThetaDataset {
  std::string source;
  std::string ddp_scenario;  ///< the example scenario that reproduces the DDP runs
  std::vector<ThetaRun> runs;
};

ThetaDataset load_thetagpu_dataset(const std::string& path);

/// The fitted constant and the cases it came from (validate/data/thetagpu_ddp_calibration.json).
struct DdpCalibration {
  double input_rate = 0.0;  ///< samples/s per process
  std::vector<std::string> fitted_on;
};
DdpCalibration load_ddp_calibration(const std::string& path);
std::string to_json_text(const DdpCalibration& c);

/// The scenario of a DDP run on `gpus` GPUs with `input_rate`.
strategy::Scenario ddp_scenario(const ThetaDataset& d, int gpus, double input_rate);

/// Fits input_rate on the data-parallel calibration rows: golden-section search over log(rate)
/// for the least squared relative error of the simulated 10-epoch times.
DdpCalibration fit_thetagpu_ddp(const ThetaDataset& d, const strategy::SimulationInputs& inputs);

struct ThetaResult {
  const ThetaRun* run = nullptr;
  double predicted_s = 0.0;
  double error_pct = 0.0;
  strategy::Report report;
};
/// Simulates every data-parallel run with `c`.
std::vector<ThetaResult> evaluate_thetagpu_ddp(const ThetaDataset& d, const DdpCalibration& c,
                                               const strategy::SimulationInputs& inputs);

}  // namespace foresight::validate
