// foresight collective: an nccl-tests-style sweep of one collective on a cluster.
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "collectives/collective_run.hpp"
#include "common/error.hpp"
#include "collectives/nccl_tuner.hpp"
#include "common/unit_parser.hpp"
#include "topologies/cluster_builders.hpp"
#include "run/calibration.hpp"

namespace foresight::cli {
namespace {

struct CollectiveOptions {
  std::string cluster;
  int gpus = 0;
  std::string op = "all_reduce";
  std::string sizes = "1K:8G";
  double factor = 2.0;
  std::string algorithm;
  std::string protocol;
  int root = 0;
  std::string network = "flow";
  std::string timing = "nccl";
  std::string calibration;
  bool json = false;
  std::string output;
};

/// "1K:8G" (from 1 KiB to 8 GiB, times `factor` each step, as nccl-tests -b -e -f) or
/// "1M,64M,1G".
std::vector<double> parse_sizes(const std::string& text, double factor) {
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

int run_collective(const CollectiveOptions& o) {
  sim::CollectiveRequest req;
  req.op = sim::parse_collective_op(o.op, "--op");
  if (!o.algorithm.empty()) req.algorithm = sim::parse_algorithm(o.algorithm, "--algorithm");
  if (!o.protocol.empty()) req.protocol = sim::parse_protocol(o.protocol, "--protocol");
  req.root = o.root;
  const auto network = sim::parse_network_kind(o.network, "--network");
  sim::CollectiveConfig config = run::collective_config(
      run::load_calibration(o.calibration.empty() ? run::default_calibration_path() : o.calibration).collectives);
  if (o.timing == "link-level") {
    config.timing = sim::CollectiveTiming::link_level;
  } else if (o.timing != "nccl") {
    throw sim::ConfigError(fmt::format("--timing: expected nccl or link-level, found \"{}\"", o.timing));
  }
  const std::vector<double> sizes = parse_sizes(o.sizes, o.factor);
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

  nlohmann::json rows = nlohmann::json::array();
  std::string text;
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
  emit(o.output, o.json ? rows.dump(1) + "\n" : text);
  return 0;
}

}  // namespace

void add_collective_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<CollectiveOptions>();
  CLI::App* cmd = app.add_subcommand("collective", "Sweep one collective over message sizes, as nccl-tests does");
  cmd->add_option("--cluster", o->cluster, "Cluster preset (see --list) or topology JSON file")->required();
  cmd->add_option("--op", o->op, "Collective: all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, "
                                 "send_recv")->capture_default_str();
  cmd->add_option("--gpus", o->gpus, "GPUs taking part: the cluster's first N (0: all)")->check(at_least(0));
  cmd->add_option("--sizes", o->sizes, "MIN:MAX (stepping by --factor) or a comma list; sizes as in nccl-tests "
                                       "(all_gather/reduce_scatter: the total)")->capture_default_str();
  cmd->add_option("--factor", o->factor, "Size multiplier between steps")->capture_default_str();
  cmd->add_option("--algorithm", o->algorithm, "Force an algorithm (default: NCCL's choice)");
  cmd->add_option("--protocol", o->protocol, "Force a protocol: LL, LL128, Simple (default: NCCL's choice)");
  cmd->add_option("--root", o->root, "Root rank of broadcast and reduce")->capture_default_str();
  cmd->add_option("--network", o->network, "Network model: flow or analytical")->capture_default_str();
  cmd->add_option("--timing", o->timing, "Collective timing: nccl or link-level")->capture_default_str();
  cmd->add_option("--calibration", o->calibration, "Collective calibration file (default: the stored one)");
  cmd->add_flag("--json", o->json, "Print a JSON list of {size_bytes, time_s, algbw_GBps, busbw_GBps, algorithm, ...}");
  cmd->add_option("-o,--output", o->output, "Write to this file (atomically) instead of standard output");
  cmd->callback([o, &run] { run = [o] { return run_collective(*o); }; });
}

}  // namespace foresight::cli
