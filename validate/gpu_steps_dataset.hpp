#pragma once
/// Single-GPU training steps measured by the project on a lent GPU (validate/data/
/// h200_single_gpu_steps/measured.json, made by scripts/gpu/device_session.sh): each row is one
/// model, batch, precision and recompute setting, described exactly by a scenario file beside it,
/// with the median step time of PyTorch's plain training loop (in one or two processes) and,
/// where recorded, the traces of a few steps (PyTorch profiler; libforesight_inject.so). Three ways to predict a row:
/// - analytical: `foresight simulate` of its scenario, the compute model alone;
/// - profile: the same with the foresight-profile database of its kernels measured on that GPU;
/// - replay: `foresight replay` of its traces on their own GPU, against the steps the trace
///   recorded (what replay reproduces; a tracer's own cost on the host is in both, and the note
///   gives it against the untraced median).
/// Nothing is fitted on these rows: every case is a prediction.

#include <string>
#include <vector>

#include "run/simulation.hpp"
#include "validate/calibration.hpp"

namespace foresight::validate {

struct GpuStepRun {
  std::string id;        ///< the configuration's name, also its scenario's
  std::string scenario;  ///< absolute paths below, resolved against the dataset's folder
  std::string profile;
  std::string kineto_trace;  ///< empty: no PyTorch-profiler trace recorded
  std::string inject_trace;  ///< empty: not recorded under libforesight_inject.so
  double first_step_s = 0.0;   ///< median untraced step of the first process (the traced one's)
  double repeat_step_s = 0.0;  ///< the same in a second process (0: measured in one process)
  double step_s = 0.0;         ///< the measured step: the mean of the medians
  double inject_step_s = 0.0;  ///< median step of the CUPTI-traced run (0: none)
  double peak_allocated_bytes = 0.0;
  Role role = Role::prediction;
};

struct GpuStepsDataset {
  std::string source;
  std::string gpu;  ///< catalog name of the GPU measured
  std::vector<GpuStepRun> runs;
};

/// Reads the dataset; ConfigError naming file, pointer, expected and found otherwise (unknown
/// keys, a missing scenario, profile or trace file, an inject row without its configuration).
GpuStepsDataset load_gpu_steps_dataset(const std::string& path);

enum class GpuStepMethod : std::uint8_t { analytical, profile, replay };

struct GpuStepResult {
  std::string id;  ///< the run's id, with "/kineto" or "/inject" for replays
  const GpuStepRun* run = nullptr;
  double predicted_s = 0.0;
  double measured_s = 0.0;
  std::string note;
};

/// Predicts every run (replay: every trace) the way `method` names.
std::vector<GpuStepResult> evaluate_gpu_steps(const GpuStepsDataset& d, GpuStepMethod method,
                                              const strategy::SimulationInputs& inputs);

}  // namespace foresight::validate
