#pragma once
/// The nccl-tests bus-bandwidth dataset (validate/data/nccl_busbw.json): measured points with
/// their source, the scenario that reproduces each (cluster, GPUs, collective, size), and each
/// point's role (calibration or prediction).

#include <optional>
#include <string>
#include <vector>

#include "collectives/collective_types.hpp"

namespace foresight::validate {

enum class Role : std::uint8_t { calibration, prediction };
std::string_view to_string(Role r);

struct NcclPoint {
  std::string id;      ///< "<series id>@<size>" or the point's own id
  std::string series;  ///< series id, empty for a lone point
  std::string system;
  std::string source;
  std::string cluster;  ///< preset name or topology file
  int gpus = 0;
  sim::CollectiveOp op = sim::CollectiveOp::all_reduce;
  std::optional<sim::Algorithm> algorithm;  ///< forced algorithm (e.g. ring with NVLS off)
  double size_bytes = 0.0;
  double busbw_GBps = 0.0;  ///< measured
  Role role = Role::prediction;
};

struct NcclDataset {
  std::string source;
  std::string calibration_rule;
  std::vector<NcclPoint> points;  ///< series points in file order, then lone points
};

/// Reads the dataset; ConfigError naming the file, JSON pointer, expected and found on any
/// problem (unknown keys, a calibration size that is not in its series, mismatched lengths...).
NcclDataset load_nccl_dataset(const std::string& path);

/// Folder of the project's data files (validate/data): $FORESIGHT_DATA when set, else the source
/// tree's folder compiled in.
std::string data_dir();

}  // namespace foresight::validate
