#pragma once
/// The ThetaGPU ResNet-18 / CIFAR-100 runs (validate/data/thetagpu_resnet18_cifar100.json), data
/// parallel and GPipe. The constants the paper does not state are fitted on the calibration rows
/// (2 and 8 GPUs) only; the 4- and 6-GPU rows are predictions:
/// - data parallel: the per-process input-pipeline rate;
/// - GPipe (torchgpipe, one process): the bookkeeping per micro-batch task and the part of each
///   forward op's dispatch that holds the GIL; the input rate is the data-parallel fit's.

#include <string>
#include <vector>

#include "run/simulation.hpp"
#include "validate/nccl_dataset.hpp"
#include "run/calibration.hpp"

namespace foresight::validate {

using run::DdpCalibration;
using run::GpipeCalibration;

struct ThetaRun {
  std::string id;
  std::string strategy;  ///< "data_parallel" or "pipeline_gpipe"
  int gpus = 0;
  double time_s = 0.0;   ///< measured 10-epoch wall time
  Role role = Role::prediction;
};

struct ThetaDataset {
  std::string source;
  std::string ddp_scenario;    ///< the example scenario that reproduces the DDP runs
  std::string gpipe_scenario;  ///< the example scenario that reproduces the GPipe runs
  std::vector<ThetaRun> runs;
};

ThetaDataset load_thetagpu_dataset(const std::string& path);

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

/// The scenario of a GPipe run on `gpus` GPUs (pp = gpus) with the fitted constants.
strategy::Scenario gpipe_scenario(const ThetaDataset& d, int gpus, double input_rate, const GpipeCalibration& g);

/// The grid the GPipe fit searches: microbatch_overhead 0, 20, ..., 160 us x dispatch_gil 3..8 us
/// (8 us is all of a forward op's host dispatch, the physical limit).
std::vector<sim::Time> gpipe_overhead_grid();
std::vector<sim::Time> gpipe_gil_grid();

/// Fits the GPipe constants on the pipeline calibration rows: the grid point with the least sum
/// of squared relative errors of the simulated 10-epoch times (ties: the first in grid order).
GpipeCalibration fit_thetagpu_gpipe(const ThetaDataset& d, double input_rate, const strategy::SimulationInputs& inputs);

/// Simulates every GPipe run.
std::vector<ThetaResult> evaluate_thetagpu_gpipe(const ThetaDataset& d, double input_rate, const GpipeCalibration& g,
                                                 const strategy::SimulationInputs& inputs);

}  // namespace foresight::validate
