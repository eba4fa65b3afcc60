#pragma once
/// The GEMM and HBM throughput dataset (validate/data/gemm_and_memory.json) and the compute
/// model's predictions of it.

#include <string>
#include <vector>

#include "validate/nccl_dataset.hpp"

namespace foresight::validate {

struct ThroughputCase {
  std::string id;
  std::string gpu;     ///< catalog name
  std::string kind;    ///< "gemm" or "hbm"
  std::string dtype;   ///< gemm: fp16, fp8, ...
  long long m = 0, n = 0, k = 0;  ///< gemm
  std::string pattern;            ///< hbm: copy, triad, dot
  double measured = 0.0;          ///< TFLOP/s (gemm) or TB/s (hbm)
  Role role = Role::prediction;
};

struct ThroughputResult {
  const ThroughputCase* c = nullptr;
  double predicted = 0.0;
  double error_pct = 0.0;
};

/// Reads the dataset; ConfigError naming file, pointer, expected and found otherwise.
std::vector<ThroughputCase> load_gemm_dataset(const std::string& path);
/// The analytical compute model's prediction of every case: GEMM TFLOP/s = 2mnk / duration;
/// HBM TB/s of a 1 GiB stream at the model's achievable bandwidth.
std::vector<ThroughputResult> evaluate_gemm_dataset(const std::vector<ThroughputCase>& cases);

}  // namespace foresight::validate
