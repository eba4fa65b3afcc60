#pragma once
/// What a GPU costs to rent and to power (run/data/prices.json, or a file of the same form):
/// per GPU model, a price per GPU-hour and the watts of the GPU and of its share of its server.
/// A run's cost is its GPU-hours at those prices; its energy, its hours at those watts (an upper
/// bound: board power and maximum system power, not measured draw).

#include <optional>
#include <string>
#include <vector>

#include "run/report.hpp"
#include "topologies/cluster.hpp"

namespace foresight::strategy {

struct GpuPrice {
  std::string gpu;  ///< catalog name
  std::optional<double> usd_per_gpu_hour;
  /// What kind of price it is ("AWS on-demand (p5.48xlarge)", "AWS Capacity Blocks", "our
  /// quote"); prices of different bases do not compare like with like. Empty when unstated.
  std::string basis;
  double gpu_watts = 0.0;
  double server_watts_per_gpu = 0.0;
  std::string source;
};

struct PriceTable {
  std::string path;
  std::vector<GpuPrice> gpus;
  /// The entry of a catalog GPU, or nullptr.
  const GpuPrice* find(std::string_view gpu) const;
};

/// Reads a price file; ConfigError naming file, pointer, expected and found otherwise (unknown
/// keys, unknown GPU models, negative prices or watts).
PriceTable load_prices(const std::string& path);
/// run/data/prices.json.
std::string default_prices_path();

/// The cost and energy of `r`'s iteration and run on the first r.gpus GPUs of `cluster`:
/// report.cost filled, or its note saying which GPU model the table lacks.
void add_costs(Report& r, const topo::Cluster& cluster, const PriceTable& prices);

}  // namespace foresight::strategy
