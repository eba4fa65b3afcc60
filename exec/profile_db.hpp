#pragma once
/// Measured kernel durations, keyed by signature (sim::OpSignature::key) and measured at one or
/// more batch sizes. The compute model prefers them to its analytical estimate. profiler/ and
/// trace import write them; traces/ reads and writes the JSON format.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exec/op_signature.hpp"

namespace foresight::sim {

/// What a database's memory-bound entries timed: the kernel itself (trace import, a database
/// written by hand), or a device-to-device copy of the kernel's bytes standing in for it
/// (foresight-profile, which has no PyTorch kernels to run). A copy runs at the vectorized path's
/// bandwidth; the compute model carries it to the kernel's own code path (ComputeModel::duration).
enum class MemoryTiming : std::uint8_t { kernel, copy };

class ProfileDb {
 public:
  /// The GPU the durations were measured on (a catalog name) and where they come from.
  std::string gpu;
  std::string source;
  MemoryTiming memory_timing = MemoryTiming::kernel;

  /// Records a measured duration (seconds > 0) of `sig` at its batch size; a second measurement
  /// at the same batch replaces the first.
  void add(const OpSignature& sig, double seconds);
  /// The duration of `sig`: measured at its batch, else interpolated linearly between the nearest
  /// measured batches; below the smallest measured batch the smallest batch's time (a kernel is
  /// not faster on less work), above the largest the largest's time scaled by the batch ratio
  /// (constant throughput). nullopt when the key was never measured.
  std::optional<double> lookup(const OpSignature& sig) const;
  std::size_t size() const;
  /// Every measurement as (signature at its batch, seconds), in key then batch order.
  std::vector<std::pair<OpSignature, double>> entries() const;

 private:
  struct Measured {
    OpSignature signature;  ///< as first added; its batch dimension is replaced per point
    std::vector<std::pair<std::int64_t, double>> points;  ///< (batch, seconds), by batch
  };
  std::map<std::string, Measured, std::less<>> by_key_;
};

}  // namespace foresight::sim
