#pragma once
/// Megatron-LM's SC21 Table 1 (validate/data/megatron_sc21_table1.json): GPT 1.7B to 1T trained with
/// tensor x pipeline x data parallelism on 32 to 3072 A100s of Selene, achieved TFLOP/s per GPU.
/// Every row needs tensor parallelism or per-layer activation recompute, which the simulator does
/// not have yet, so each row is reported as unsupported with what it needs (not dropped).

#include <string>
#include <vector>

#include "validate/nccl_dataset.hpp"

namespace foresight::validate {

struct MegatronRun {
  std::string id;
  double params_b = 0.0;
  int hidden = 0, layers = 0, heads = 0;
  int tp = 1, pp = 1, gpus = 0;
  int global_batch = 0, micro_batch = 0;
  int layers_per_virtual_stage = 0;  ///< 0: no interleaving
  std::string recompute;
  double tflops_per_gpu = 0.0;  ///< measured
  Role role = Role::prediction;
};

struct MegatronDataset {
  std::string source;
  std::vector<MegatronRun> runs;
};

/// Reads the dataset; ConfigError naming file, pointer, expected and found otherwise.
MegatronDataset load_megatron_dataset(const std::string& path);

/// What the simulator lacks to run `r` ("tensor parallelism (tp = 8)", ...); empty when none.
std::vector<std::string> megatron_missing_features(const MegatronRun& r);

}  // namespace foresight::validate
