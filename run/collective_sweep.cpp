#include "run/collective_sweep.hpp"

#include <fmt/core.h>

#include <cmath>

#include "collectives/collective_run.hpp"
#include "collectives/nccl_tuner.hpp"
#include "common/error.hpp"
#include "common/unit_parser.hpp"
#include "run/calibration.hpp"
#include "topologies/cluster_builders.hpp"

namespace foresight::run {

std::vector<double> collective_sizes(const std::string& text, double factor) {
  std::vector<double> out;
  const auto colon = text.find(':');
  if (colon == std::string::npos) {
    std::size_t start = 0;
    while (start <= text.size()) {
      const auto comma = text.find(',', start);
      const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      out.push_back(sim::parse_bytes(item, "--sizes").as_double());
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return out;
  }
  const double lo = sim::parse_bytes(text.substr(0, colon), "--sizes (minimum)").as_double();
  const double hi = sim::parse_bytes(text.substr(colon + 1), "--sizes (maximum)").as_double();
  if (lo <= 0.0 || hi < lo) {
    throw sim::ConfigError(fmt::format("--sizes: expected MIN:MAX with 0 < MIN <= MAX, found \"{}\"", text));
  }
  if (!(factor > 1.0)) throw sim::ConfigError(fmt::format("--factor: expected a number above 1, found {}", factor));
  // Bounded work: the row count is known before any row is simulated.
  constexpr double kMaxSizes = 10'000;
  const double rows = std::floor(std::log(hi / lo) / std::log(factor)) + 1.0;
  if (!(rows <= kMaxSizes)) {
    throw sim::ConfigError(fmt::format("--sizes {} with --factor {} makes {:.3g} sizes; expected at most {:.0f}: "
                                       "use a larger factor or a narrower range",
                                       text, factor, rows, kMaxSizes));
  }
  for (double s = lo; s <= hi * (1 + 1e-12); s *= factor) out.push_back(std::round(s));
  return out;
}

CollectiveSweep collective_sweep(const CollectiveSweepOptions& o) {
  sim::CollectiveRequest req;
  req.op = sim::parse_collective_op(o.op, "--op");
  if (!o.algorithm.empty()) req.algorithm = sim::parse_algorithm(o.algorithm, "--algorithm");
  if (!o.protocol.empty()) req.protocol = sim::parse_protocol(o.protocol, "--protocol");
  req.root = o.root;
  const auto network = sim::parse_network_kind(o.network, "--network");
  sim::CollectiveConfig config = collective_config(
      load_calibration(o.calibration.empty() ? default_calibration_path() : o.calibration).collectives);
  if (o.timing == "link-level") {
    config.timing = sim::CollectiveTiming::link_level;
  } else if (o.timing != "nccl") {
    throw sim::ConfigError(fmt::format("--timing: expected nccl or link-level, found \"{}\"", o.timing));
  }
  const std::vector<double> sizes = collective_sizes(o.sizes, o.factor);
  const topo::Cluster cluster = topo::resolve_cluster(o.cluster, o.gpus);
  const int gpus = o.gpus > 0 ? o.gpus : static_cast<int>(cluster.gpu_count());
  if (static_cast<std::size_t>(gpus) > cluster.gpu_count()) {
    throw sim::ConfigError(fmt::format("--gpus: {} asked, but {} has {} GPUs", gpus, cluster.name(), cluster.gpu_count()));
  }
  if (req.op == sim::CollectiveOp::send_recv) {
    req.ranks = {0, static_cast<sim::GpuId>(gpus - 1)};
  } else {
    for (int g = 0; g < gpus; ++g) req.ranks.push_back(static_cast<sim::GpuId>(g));
  }

  CollectiveSweep out;
  nlohmann::json& rows = out.rows;
  std::string& text = out.text;
  for (const double s : sizes) {
    req.bytes = s;
    const auto m = sim::measure_collective(cluster, config, network, req);
    if (text.empty()) {
      text += fmt::format("# foresight collective: {} on {} GPUs of {} ({} node{}), network {}, timing {}\n",
                          o.op, req.ranks.size(), cluster.name(), m.plan.nodes, m.plan.nodes == 1 ? "" : "s",
                          o.network, o.timing);
      text += fmt::format("# calibration: {}; NCCL run-time channels: {}\n", m.plan.calibration, m.plan.nccl_channels);
      text += fmt::format("#{:>13} {:>12} {:>12} {:>12}  {}\n", "size(B)", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
                          "algorithm");
    }
    const std::string algo = fmt::format("{}/{}", sim::to_string(m.plan.algorithm), sim::to_string(m.plan.protocol));
    text += fmt::format("{:>14.0f} {:>12.2f} {:>12.2f} {:>12.2f}  {}\n", s, m.time.microseconds(), m.algbw_GBps,
                        m.busbw_GBps, algo);
    rows.push_back({{"size_bytes", s},
                    {"time_s", m.time.seconds()},
                    {"algbw_GBps", m.algbw_GBps},
                    {"busbw_GBps", m.busbw_GBps},
                    {"algorithm", std::string(sim::to_string(m.plan.algorithm))},
                    {"protocol", std::string(sim::to_string(m.plan.protocol))},
                    {"channels", m.plan.channels},
                    {"nccl_model_time_s", m.plan.nccl_us * 1e-6}});
  }
  return out;
}

}  // namespace foresight::run
