#pragma once
/// CUDA runtime failures as the project's errors, for the profiler's CUDA sources.

#include <cuda_runtime_api.h>

#include <string>

#include "common/error.hpp"

namespace foresight::prof::detail {

/// Throws sim::Error "`what`: <CUDA's message>" unless `e` is cudaSuccess.
inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw sim::Error(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace foresight::prof::detail
