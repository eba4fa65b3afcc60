#pragma once
/// An NCCL collective sweep's results, independent of CUDA: the sizes it runs, the bandwidths it
/// derives and the file it writes. `foresight-profile --nccl-sweep OUT.json` (nccl_bench.hpp)
/// measures the rows; the format:
///   { "format": "foresight-nccl-sweep", "version": 1,
///     "gpus": 8,                                   (GPUs in the communicator: all visible ones)
///     "note": "...",                               (e.g. that one GPU gives n = 1 rows; may be "")
///     "provenance": {"nccl": "2.28.3", "device": "NVIDIA H100 80GB HBM3", "driver": "13000",
///                    "cuda_runtime": "13000", "date": "2025-01-31", "timing": "...",
///                    "warmup": "5", "reps": "20", "dtype": "float32", "min_bytes": "8",
///                    "max_bytes": "1073741824", "step": "2"},              (strings only)
///     "rows": [ {"op": "all_reduce", "bytes": 1048576, "gpus": 8, "seconds": 3.1e-05,
///                "algbw_GBps": 33.8, "busbw_GBps": 59.2}, ... ] }
/// Rows in op then size order. Definitions follow nccl-tests (doc/PERFORMANCE.md):
/// - bytes: all_reduce and broadcast, each rank's buffer; all_gather, the gathered buffer (each
///   rank contributes bytes / gpus); reduce_scatter, each rank's input (each keeps bytes / gpus);
///   alltoall, each rank's send buffer (bytes / gpus to every rank, itself included);
/// - seconds: the median over repetitions of one collective's time (the slowest GPU's);
/// - algbw_GBps = bytes / seconds / 1e9;
/// - busbw_GBps = algbw_GBps x factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter and
///   alltoall (n-1)/n; broadcast 1 (n = gpus). With one GPU every factor but broadcast's is 0.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace foresight::prof {

enum class CollectiveOp : std::uint8_t { all_reduce, all_gather, reduce_scatter, broadcast, alltoall };
inline constexpr CollectiveOp kSweepOps[] = {CollectiveOp::all_reduce, CollectiveOp::all_gather,
                                             CollectiveOp::reduce_scatter, CollectiveOp::broadcast,
                                             CollectiveOp::alltoall};
/// "all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall".
std::string_view to_string(CollectiveOp op);

/// nccl-tests' bus-bandwidth factor of `op` over `gpus` (>= 1) ranks (see above).
double bus_bandwidth_factor(CollectiveOp op, int gpus);

/// The sizes of a sweep in bytes: min, min x factor, min x factor^2 ... while <= max.
/// ConfigError unless 1 <= min <= max and factor >= 2.
std::vector<std::uint64_t> sweep_sizes(std::uint64_t min_bytes, std::uint64_t max_bytes, int factor);

/// The element count of `op`'s `bytes` (as defined above) in elements of `element_bytes`,
/// rounded down to a multiple of `gpus` where the op splits its buffer over the ranks
/// (all_gather, reduce_scatter, alltoall), and at least one element per rank.
std::uint64_t sweep_elements(CollectiveOp op, std::uint64_t bytes, int gpus, int element_bytes);

struct CollectiveRow {
  CollectiveOp op = CollectiveOp::all_reduce;
  std::uint64_t bytes = 0;
  int gpus = 1;
  double seconds = 0.0;
  double algbw_gbps = 0.0;
  double busbw_gbps = 0.0;
};

/// A row with its bandwidths derived from bytes and seconds (> 0).
CollectiveRow collective_row(CollectiveOp op, std::uint64_t bytes, int gpus, double seconds);

struct CollectiveSweep {
  int gpus = 1;
  std::string note;
  std::vector<std::pair<std::string, std::string>> provenance;
  std::vector<CollectiveRow> rows;
};

/// The file text described above.
std::string collective_sweep_json(const CollectiveSweep& sweep);

}  // namespace foresight::prof
