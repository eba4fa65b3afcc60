#pragma once
/// The NCCL collective sweep (built where NCCL is found: FORESIGHT_HAVE_NCCL): all_reduce,
/// all_gather, reduce_scatter, broadcast and alltoall over every visible GPU of this process,
/// one communicator per GPU from ncclCommInitAll, at sizes from min to max bytes. The rows,
/// their bandwidths and the file are collective_sweep.hpp's.

#include <cstdint>

#include "profiler/collective_sweep.hpp"

namespace foresight::prof {

struct NcclSweepOptions {
  std::uint64_t min_bytes = 8;
  std::uint64_t max_bytes = 1ULL << 30;  ///< lowered to what every GPU's free memory holds
  int factor = 2;                        ///< each size is the previous one times this
  int warmup = 5;
  int reps = 20;
};

/// Runs the sweep. Each collective launches on every GPU in one NCCL group (alltoall as grouped
/// ncclSend / ncclRecv pairs with every rank), float32 data (sum for the reductions, root 0 for
/// broadcast), out of place; a repetition's time is the slowest GPU's, between CUDA events
/// recorded on each GPU's stream before and after the group; the median over `reps` after
/// `warmup` is recorded. Sizes that round (sweep_elements) to one already run are run once.
/// Provenance: NCCL version, GPUs, timing, warm-up, repetitions, dtype, sizes; the note
/// says when one GPU gives n = 1 rows or free memory capped the sizes. sim::Error when CUDA or
/// NCCL fails, ConfigError for bad options.
CollectiveSweep run_nccl_sweep(const NcclSweepOptions& options);

/// ncclGetVersion(): e.g. 22803 for 2.28.3.
int nccl_version();

}  // namespace foresight::prof
