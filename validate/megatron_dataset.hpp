#pragma once
/// Megatron-LM's SC21 Table 1 (validate/data/megatron_sc21_table1.json): GPT 1.7B to 1T trained with
/// tensor x pipeline x data parallelism on 32 to 3072 A100s of Selene, achieved TFLOP/s per GPU.
/// Each row is simulated on a `selene` cluster of its size with the model of
/// validate/data/megatron_sc21/<id>.json (GPT-2 style, Megatron's shapes); rows too large to
/// simulate without rank folding are reported as unsupported with what they need, not dropped.

#include <string>
#include <vector>

#include "run/scenario.hpp"
#include "run/simulation.hpp"
#include "validate/nccl_dataset.hpp"
#include "run/calibration.hpp"

namespace foresight::validate {

using run::MegatronCalibration;

struct MegatronRun {
  std::string id;
  double params_b = 0.0;
  int hidden = 0, layers = 0, heads = 0;
  int tp = 1, pp = 1, gpus = 0;
  int global_batch = 0, micro_batch = 0;
  int layers_per_virtual_stage = 0;  ///< 0: no interleaving
  std::string recompute;
  int seq_len = 0;
  int vocab = 0;
  std::string precision;
  double tflops_per_gpu = 0.0;  ///< measured
  Role role = Role::prediction;
};

struct MegatronDataset {
  std::string source;
  std::vector<MegatronRun> runs;
};

/// Reads the dataset; ConfigError naming file, pointer, expected and found otherwise.
MegatronDataset load_megatron_dataset(const std::string& path);

/// Training steps each row simulates (the first warms up; a pipeline fills within a step).
inline constexpr int kMegatronSteps = 2;
/// The largest execution graph the suite simulates: 10 M nodes (~3 GB). With rank folding
/// every row fits: the 3072-GPU row simulates its 64 stages, ~6.5 M nodes.
inline constexpr double kMegatronNodeLimit = 10e6;

/// Estimated execution-graph nodes of row `r`: simulated ranks (one per stage when replicas and
/// TP ranks fold, as they do on Selene's uniform nodes) x micro-batches x steps x its layers per
/// stage x ~50 nodes per layer.
double megatron_graph_nodes(const MegatronRun& r);

/// What the simulator lacks to run `r` in the suite; empty when none.
std::vector<std::string> megatron_missing_features(const MegatronRun& r);

/// The paper's model FLOPs per iteration, with full recompute (N21 Eq. 3):
/// 96 B s l h^2 (1 + s / 6h + V / 16 l h). TFLOP/s per GPU = that / (iteration x GPUs).
double megatron_flops_per_iteration(const MegatronRun& r);

/// The scenario of row `r` (`dataset_file` locates the model configs beside it): Megatron-LM
/// v2's kernels (kernel_generation megatron-2021), whose rate the inputs carry.
strategy::Scenario megatron_scenario(const MegatronRun& r, const std::string& dataset_file);

/// Predicted TFLOP/s per GPU of row `r`: the paper's FLOPs over the simulated iteration, with
/// Megatron-LM v2's kernels at inputs.megatron_2021_gemm_efficiency.
double megatron_predicted_tflops(const MegatronRun& r, const std::string& dataset_file,
                                 const strategy::SimulationInputs& inputs, double* iteration_s = nullptr);

/// Fits the rate of Megatron-LM v2's matrix kernels (calibration.json's
/// megatron_sc21.gemm_efficiency, which kernel_generation megatron-2021 applies) on the
/// calibration rows: golden-section search over its log in [0.3, 2] for the least squared
/// relative error of their TFLOP/s per GPU. ConfigError when no calibration row can be simulated.
MegatronCalibration fit_megatron(const MegatronDataset& d, const std::string& dataset_file,
                                 const strategy::SimulationInputs& inputs);

}  // namespace foresight::validate
