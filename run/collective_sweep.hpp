#pragma once
/// An nccl-tests-style sweep of one collective over message sizes on a cluster: what
/// `foresight collective` prints and `foresight.collective()` returns.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace foresight::run {

struct CollectiveSweepOptions {
  std::string cluster;  ///< preset or topology JSON file
  int gpus = 0;         ///< the cluster's first N GPUs take part (0: all)
  std::string op = "all_reduce";
  std::string sizes = "1K:8G";  ///< "MIN:MAX" stepping by `factor`, or "1M,64M,1G"
  double factor = 2.0;
  std::string algorithm;  ///< forced, or empty for NCCL's choice
  std::string protocol;
  int root = 0;
  std::string network = "flow";
  std::string timing = "nccl";  ///< nccl or link-level
  std::string calibration;      ///< empty: the stored one
};

struct CollectiveSweep {
  /// {size_bytes, time_s, algbw_GBps, busbw_GBps, algorithm, protocol, channels,
  /// nccl_model_time_s} per size, in order.
  nlohmann::json rows = nlohmann::json::array();
  /// The table `foresight collective` prints: a header, then a line per size.
  std::string text;
};

/// "1K:8G" (from 1 KiB to 8 GiB, times `factor` each step, as nccl-tests -b -e -f) or
/// "1M,64M,1G"; ConfigError naming --sizes or --factor, and for more than 10,000 sizes.
std::vector<double> collective_sizes(const std::string& text, double factor);

/// Runs the sweep; ConfigError (naming the option) for a bad choice.
CollectiveSweep collective_sweep(const CollectiveSweepOptions& o);

}  // namespace foresight::run
