#include "profiler/collective_sweep.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace foresight::prof {

std::string_view to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_reduce: return "all_reduce";
    case CollectiveOp::all_gather: return "all_gather";
    case CollectiveOp::reduce_scatter: return "reduce_scatter";
    case CollectiveOp::broadcast: return "broadcast";
    case CollectiveOp::alltoall: return "alltoall";
  }
  return "unknown";
}

double bus_bandwidth_factor(CollectiveOp op, int gpus) {
  if (gpus < 1) throw sim::InternalError("bus bandwidth factor of " + std::to_string(gpus) + " GPUs");
  const double n = gpus;
  switch (op) {
    case CollectiveOp::all_reduce: return 2.0 * (n - 1.0) / n;
    case CollectiveOp::broadcast: return 1.0;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter:
    case CollectiveOp::alltoall: return (n - 1.0) / n;
  }
  return 1.0;
}

std::vector<std::uint64_t> sweep_sizes(std::uint64_t min_bytes, std::uint64_t max_bytes, int factor) {
  if (min_bytes < 1 || max_bytes < min_bytes || factor < 2) {
    throw sim::ConfigError("NCCL sweep: expected 1 <= min bytes <= max bytes and a step factor >= 2, found min " +
                           std::to_string(min_bytes) + ", max " + std::to_string(max_bytes) + ", factor " +
                           std::to_string(factor));
  }
  std::vector<std::uint64_t> sizes;
  const auto f = static_cast<std::uint64_t>(factor);
  for (std::uint64_t b = min_bytes;; b *= f) {
    sizes.push_back(b);
    if (b > max_bytes / f) break;  // the next size would pass max (or overflow)
  }
  return sizes;
}

std::uint64_t sweep_elements(CollectiveOp op, std::uint64_t bytes, int gpus, int element_bytes) {
  const auto n = static_cast<std::uint64_t>(std::max(gpus, 1));
  const std::uint64_t count = bytes / static_cast<std::uint64_t>(std::max(element_bytes, 1));
  const bool splits = op == CollectiveOp::all_gather || op == CollectiveOp::reduce_scatter ||
                      op == CollectiveOp::alltoall;
  if (!splits) return std::max<std::uint64_t>(count, 1);
  return std::max(count / n * n, n);
}

CollectiveRow collective_row(CollectiveOp op, std::uint64_t bytes, int gpus, double seconds) {
  if (!(seconds > 0.0)) throw sim::InternalError("collective row with non-positive time");
  CollectiveRow r;
  r.op = op;
  r.bytes = bytes;
  r.gpus = gpus;
  r.seconds = seconds;
  r.algbw_gbps = static_cast<double>(bytes) / seconds * 1e-9;
  r.busbw_gbps = r.algbw_gbps * bus_bandwidth_factor(op, gpus);
  return r;
}

std::string collective_sweep_json(const CollectiveSweep& sweep) {
  using nlohmann::json;
  json provenance = json::object();
  for (const auto& [key, value] : sweep.provenance) provenance[key] = value;
  json rows = json::array();
  for (const CollectiveRow& r : sweep.rows) {
    rows.push_back({{"op", to_string(r.op)},
                    {"bytes", r.bytes},
                    {"gpus", r.gpus},
                    {"seconds", r.seconds},
                    {"algbw_GBps", r.algbw_gbps},
                    {"busbw_GBps", r.busbw_gbps}});
  }
  const json doc = {{"format", "foresight-nccl-sweep"}, {"version", 1},          {"gpus", sweep.gpus},
                    {"note", sweep.note},               {"provenance", provenance}, {"rows", rows}};
  return doc.dump(1) + "\n";
}

}  // namespace foresight::prof
