#include "collectives/collective_plan.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "common/error.hpp"
#include "collectives/detail/collective_layout.hpp"
#include "collectives/nccl_tuner.hpp"

namespace foresight::sim {
namespace {

using detail::NodeGroup;
using detail::group_by_node;
using detail::Member;
using detail::build_rings;
using detail::flow;
using detail::add_tree_flows;
using detail::add_nvls_flows;
using detail::p2p_path;
using detail::wire_latency;

constexpr double kInf = std::numeric_limits<double>::infinity();

[[noreturn]] void unavailable(const CollectiveRequest& r, std::string_view what, std::string_view why) {
  throw ConfigError(fmt::format("{}: {} is not available on this communicator of {} ranks ({})",
                                to_string(r.op), what, r.ranks.size(), why));
}

void validate(const Fabric& fabric, const CollectiveRequest& r) {
  if (r.ranks.empty()) throw ConfigError(fmt::format("{}: the communicator is empty", to_string(r.op)));
  std::set<GpuId> seen;
  for (const GpuId g : r.ranks) {
    if (g >= fabric.gpu_count()) {
      throw ConfigError(fmt::format("{}: rank GPU {} does not exist (the cluster has {} GPUs)",
                                    to_string(r.op), g, fabric.gpu_count()));
    }
    if (!seen.insert(g).second) {
      throw ConfigError(fmt::format("{}: GPU {} appears twice in the communicator", to_string(r.op), g));
    }
  }
  if (!(r.bytes >= 0.0) || !std::isfinite(r.bytes)) {
    throw ConfigError(fmt::format("{}: size must be a non-negative number of bytes, found {}",
                                  to_string(r.op), r.bytes));
  }
  const auto n = r.ranks.size();
  if ((r.op == CollectiveOp::broadcast || r.op == CollectiveOp::reduce) &&
      (r.root < 0 || static_cast<std::size_t>(r.root) >= n)) {
    throw ConfigError(fmt::format("{}: root rank {} is outside the communicator of {} ranks",
                                  to_string(r.op), r.root, n));
  }
  if (r.op == CollectiveOp::send_recv && n != 2) {
    throw ConfigError(fmt::format("send_recv: expected 2 ranks (source, destination), found {}", n));
  }
  if (!r.send_matrix.empty()) {
    if (r.op != CollectiveOp::all_to_all) {
      throw ConfigError(fmt::format("{}: a send matrix is only meaningful for all_to_all", to_string(r.op)));
    }
    if (r.send_matrix.size() != n * n) {
      throw ConfigError(fmt::format("all_to_all: send matrix has {} entries, expected {} x {} = {}",
                                    r.send_matrix.size(), n, n, n * n));
    }
    for (const double b : r.send_matrix) {
      if (!(b >= 0.0) || !std::isfinite(b)) {
        throw ConfigError(fmt::format("all_to_all: send matrix entry {} is not a byte count", b));
      }
    }
  }
}

/// Everything the phase builders share.
struct Context {
  const Fabric& fabric;
  const CollectiveConfig& config;
  const CollectiveRequest& request;
  std::vector<NodeGroup> nodes;
  bool link_level = false;
  int n = 0;
};

/// Calibrated timing of one NCCL-modelled transfer.
struct Timing {
  double alpha_us = 0.0;  ///< scaled NCCL latency
  double bw_us = 0.0;     ///< S / calibrated algbw: what the protocol allows
  double link_us = 0.0;   ///< the same transfers at the links' own speed, uncontended
  double launch_us = 0.0;
  bool pipelined = false;
  /// The bandwidth time the transfer takes alone: the protocol's or the links', the slower.
  double transfer_us() const { return std::max(bw_us, link_us); }
  double fill_us() const {
    return pipelined ? 2.0 * std::sqrt(alpha_us * transfer_us()) : 0.0;
  }
  double total() const { return launch_us + alpha_us + transfer_us() + fill_us(); }
};

Timing calibrated(const NcclTuner::Cost& cost, const CollectiveCalibration& cal, Protocol p,
                  double bytes, bool with_launch) {
  Timing t;
  t.alpha_us = cal.latency_scale * cost.latency_us;
  t.bw_us = bytes / (1000.0 * cost.algbw * cal.efficiency[static_cast<std::size_t>(p)]);
  // The segment-size trade-off behind the fill term is Simple's: it moves data in large chunks
  // with fences. LL and LL128 synchronize every 8- or 128-byte line with flags and stream
  // without chunking (nccl-model.md sec. 3, #281), so they have no fill.
  t.pipelined = cal.pipelined && bytes > 0.0 && p == Protocol::simple;
  t.launch_us = with_launch ? cal.launch_us : 0.0;
  return t;
}

/// Uncontended rate of a path: its slowest link at that link class's efficiency (bytes/s).
double path_rate(const Context& ctx, const std::vector<LinkId>& path) {
  double rate = kInf;
  for (const LinkId l : path) {
    const LinkInfo& info = ctx.fabric.link(l);
    rate = std::min(rate, info.capacity.bytes_per_second() * ctx.config.links.of(info.cls));
  }
  return rate;
}

Time us(double v) { return Time::from_seconds(v * 1e-6); }

/// A ring phase of `steps` steps moving `step_payload` per ring per step. With NCCL timing,
/// `timing` learns the phase's link-limited time (for the pipeline fill).
PlannedPhase ring_phase(const Context& ctx, std::vector<PlannedRing> rings, int steps,
                        double step_payload, Protocol p, Timing* timing) {
  PlannedPhase ph;
  ph.kind = PlannedPhase::Kind::ring;
  ph.steps = steps;
  ph.step_bytes = step_payload * protocol_wire_factor(p);
  ph.step_cap = kInf;
  if (timing != nullptr) {
    // NCCL timing: the latency spread evenly over the steps, the bandwidth time over the steps'
    // transfers, launch and pipeline fill before the first step.
    double slowest = kInf;
    for (const auto& r : rings) {
      for (const auto& hop : r.hops) slowest = std::min(slowest, path_rate(ctx, hop));
    }
    timing->link_us = ph.step_bytes > 0.0 ? steps * ph.step_bytes / slowest * 1e6 : 0.0;
    ph.start_delay = us(timing->launch_us + timing->fill_us());
    const Time per_step = us(timing->alpha_us / steps);
    for (auto& r : rings) std::fill(r.hop_latency.begin(), r.hop_latency.end(), per_step);
    if (ph.step_bytes > 0.0 && timing->bw_us > 0.0) {
      ph.step_cap = ph.step_bytes / (timing->bw_us * 1e-6 / steps);
    }
  }
  ph.rings = std::move(rings);
  return ph;
}

/// A flow phase whose flows all run for the calibrated bandwidth time (NCCL timing), or at link
/// speed with wire latency (link-level).
PlannedPhase flow_phase(const Context& ctx, std::vector<PlannedFlow> flows, Protocol p,
                        Timing* timing) {
  PlannedPhase ph;
  ph.kind = PlannedPhase::Kind::flows;
  double link_s = 0.0;
  for (PlannedFlow& f : flows) {
    f.bytes *= protocol_wire_factor(p);
    f.cap = kInf;
    f.latency = Time{};
    if (timing == nullptr) {
      f.latency = wire_latency(ctx.fabric, f.path);
    } else if (f.bytes > 0.0) {
      link_s = std::max(link_s, f.bytes / path_rate(ctx, f.path));
      if (timing->bw_us > 0.0) f.cap = f.bytes / (timing->bw_us * 1e-6);
    }
  }
  if (timing != nullptr) {
    timing->link_us = link_s * 1e6;
    ph.start_delay = us(timing->launch_us + timing->fill_us() + timing->alpha_us);
  }
  ph.flows = std::move(flows);
  return ph;
}

int ring_channels(const Context& ctx, const CommunicatorFacts& facts) {
  return ctx.nodes.size() == 1 ? 1 : ring_search_channels(facts);
}

/// The ranks' NCCL-modelled (algorithm, protocol), honouring hints.
std::pair<Algorithm, Protocol> choose(const Context& ctx, const NcclTuner& tuner) {
  const CollectiveRequest& r = ctx.request;
  if (r.algorithm) {
    std::optional<Protocol> best;
    double best_t = kInf;
    for (int p = 0; p < kProtocolCount; ++p) {
      const auto proto = static_cast<Protocol>(p);
      if (r.protocol && *r.protocol != proto) continue;
      if (!tuner.available(r.op, *r.algorithm, proto)) continue;
      const double t = tuner.cost(r.op, *r.algorithm, proto, r.bytes).time_us();
      if (t < best_t) {
        best_t = t;
        best = proto;
      }
    }
    if (!best) {
      unavailable(r, fmt::format("algorithm {}{}", to_string(*r.algorithm),
                                 r.protocol ? fmt::format(" with protocol {}", to_string(*r.protocol)) : ""),
                  "NCCL offers tree for all_reduce; nvls on one node and nvls_tree across nodes with an "
                  "NVLink-SHARP NVSwitch (compute capability >= 90); pat for all_gather/reduce_scatter "
                  "with one GPU per node; LL128 only over NVLink");
    }
    return {*r.algorithm, *best};
  }
  std::optional<NcclTuner::Choice> best;
  for (int a = 0; a < kAlgorithmCount; ++a) {
    for (int p = 0; p < kProtocolCount; ++p) {
      const auto algo = static_cast<Algorithm>(a);
      const auto proto = static_cast<Protocol>(p);
      if (r.protocol && *r.protocol != proto) continue;
      if (!tuner.available(r.op, algo, proto)) continue;
      const auto c = tuner.cost(r.op, algo, proto, r.bytes);
      if (!best || c.time_us() < best->cost.time_us()) best = NcclTuner::Choice{algo, proto, c};
    }
  }
  if (!best) unavailable(r, fmt::format("protocol {}", to_string(*r.protocol)), "LL128 needs NVLink");
  return {best->algorithm, best->protocol};
}

void plan_hierarchical(const Context& ctx, CollectivePlan& plan) {
  const CollectiveRequest& r = ctx.request;
  const std::size_t ppn = ctx.nodes.front().members.size();
  for (const NodeGroup& ng : ctx.nodes) {
    if (ng.members.size() != ppn) {
      throw ConfigError(fmt::format("all_reduce: hierarchical needs the same number of ranks on every "
                                    "node; node {} has {}, node {} has {}",
                                    ctx.nodes.front().node, ppn, ng.node, ng.members.size()));
    }
  }
  const double shard = r.bytes / static_cast<double>(ppn);
  plan.algorithm = Algorithm::hierarchical;
  plan.protocol = r.protocol.value_or(Protocol::simple);
  plan.channels = static_cast<int>(ppn);
  // Inter-node rings: one per local slot, across the nodes, each on its members' own NICs.
  std::vector<GpuId> slot0;
  std::vector<PlannedRing> inter;
  for (std::size_t k = 0; k < ppn; ++k) {
    std::vector<NodeGroup> slot_nodes;
    for (const NodeGroup& ng : ctx.nodes) {
      NodeGroup one{ng.node, {ng.members[k]}, {}};
      if (ng.members[k].rail >= 0) one.rails.push_back(ng.members[k].rail);
      slot_nodes.push_back(one);
      if (k == 0) slot0.push_back(ng.members[k].gpu);
    }
    auto rings = build_rings(ctx.fabric, slot_nodes, 1);
    inter.push_back(std::move(rings.front()));
  }
  std::vector<PlannedRing> intra;
  for (const NodeGroup& ng : ctx.nodes) {
    auto rings = build_rings(ctx.fabric, {ng}, 1);
    intra.push_back(std::move(rings.front()));
  }
  const int n_nodes = static_cast<int>(ctx.nodes.size());
  const int intra_steps = static_cast<int>(ppn) - 1;
  std::vector<GpuId> node0;
  for (const Member& m : ctx.nodes.front().members) node0.push_back(m.gpu);

  auto phase = [&](std::vector<PlannedRing> rings, CollectiveOp op, const std::vector<GpuId>& sub,
                   double size, int steps, double step_payload, bool first) {
    if (ctx.link_level) return ring_phase(ctx, std::move(rings), steps, step_payload, plan.protocol, nullptr);
    const NcclTuner tuner(communicator_facts(ctx.fabric, sub));
    Protocol proto = Protocol::simple;
    double best = kInf;
    for (int p = 0; p < kProtocolCount; ++p) {
      const auto pr = static_cast<Protocol>(p);
      if ((r.protocol && *r.protocol != pr) || !tuner.available(op, Algorithm::ring, pr)) continue;
      const double t = tuner.cost(op, Algorithm::ring, pr, size).time_us();
      if (t < best) {
        best = t;
        proto = pr;
      }
    }
    const auto& cal = ctx.config.calibration_for(tuner.facts().compute_capability);
    Timing t = calibrated(tuner.cost(op, Algorithm::ring, proto, size), cal, proto, size, first);
    auto ph = ring_phase(ctx, std::move(rings), steps, step_payload, proto, &t);
    plan.predicted_us += t.total();
    plan.nccl_us += best;
    plan.calibration = cal.name;
    return ph;
  };
  if (ppn > 1) {
    plan.phases.push_back(phase(intra, CollectiveOp::reduce_scatter, node0, r.bytes, intra_steps,
                                r.bytes / static_cast<double>(ppn), true));
  }
  plan.phases.push_back(phase(std::move(inter), CollectiveOp::all_reduce, slot0, shard,
                              2 * (n_nodes - 1), shard / n_nodes, ppn == 1));
  if (ppn > 1) {
    plan.phases.push_back(phase(std::move(intra), CollectiveOp::all_gather, node0, r.bytes,
                                intra_steps, r.bytes / static_cast<double>(ppn), false));
  }
}

void plan_direct(const Context& ctx, CollectivePlan& plan, const CommunicatorFacts& facts) {
  const CollectiveRequest& r = ctx.request;
  plan.algorithm = Algorithm::direct;
  plan.protocol = Protocol::simple;
  std::vector<PlannedFlow> flows;
  const std::size_t n = r.ranks.size();
  if (r.op == CollectiveOp::send_recv) {
    flows.push_back(PlannedFlow{p2p_path(ctx.fabric, ctx.nodes, r.ranks[0], r.ranks[1], ctx.config.pxn, 0),
                                r.bytes, kInf, Time{}});
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        if (i == j) continue;
        const double b = r.send_matrix.empty() ? r.bytes / static_cast<double>(n) : r.send_matrix[i * n + j];
        if (b <= 0.0) continue;
        flows.push_back(PlannedFlow{p2p_path(ctx.fabric, ctx.nodes, r.ranks[i], r.ranks[j], ctx.config.pxn, i * n + j),
                                    b, kInf, Time{}});
      }
    }
  }
  plan.channels = 1;
  PlannedPhase ph;
  ph.kind = PlannedPhase::Kind::flows;
  if (ctx.link_level) {
    for (PlannedFlow& f : flows) f.latency = wire_latency(ctx.fabric, f.path);
  } else {
    // NCCL has no model for point-to-point (nccl-model.md sec. 8). We charge one Simple ring
    // step: base 8.4 us plus one hop (NVLink 3.4, PCI 5.7, or NET 14 us when a peer is remote).
    const bool remote = facts.nodes > 1;
    const double hop = remote ? 14.0 : (facts.nvlink_intra ? 3.4 : 5.7);
    const auto& cal = ctx.config.calibration_for(facts.compute_capability);
    ph.start_delay = us(cal.launch_us + cal.latency_scale * (8.4 + hop));
    plan.calibration = cal.name;
  }
  ph.flows = std::move(flows);
  plan.phases.push_back(std::move(ph));
}

}  // namespace

double protocol_wire_factor(Protocol p) {
  switch (p) {
    case Protocol::ll:
      return 2.0;
    case Protocol::ll128:
      return 128.0 / 120.0;
    case Protocol::simple:
      return 1.0;
  }
  return 1.0;
}

int double_tree_parent(int r, int n, int tree) {
  auto btree = [n](int x) {
    if (x == 0) return -1;
    const int bit = x & -x;
    int up = (x ^ bit) | (bit << 1);
    if (up >= n) up = x ^ bit;
    return up;
  };
  if (tree == 0) return btree(r);
  if (n % 2 == 0) {
    const int p = btree(n - 1 - r);
    return p < 0 ? -1 : n - 1 - p;
  }
  const int p = btree((r - 1 + n) % n);
  return p < 0 ? -1 : (p + 1) % n;
}

namespace {
/// add_tree_flows, its paths routed once per communicator where `shapes` keeps them.
void add_trees(const Context& ctx, PlanShapes* shapes, int channels, double bytes, bool intra_chain,
               std::vector<PlannedFlow>& out) {
  const auto route = [&] { return detail::tree_paths(ctx.fabric, ctx.nodes, channels, intra_chain); };
  if (shapes == nullptr) {
    add_tree_flows(route(), ctx.nodes.size(), channels, bytes, out);
  } else {
    add_tree_flows(shapes->tree_paths(ctx.request.ranks, channels, intra_chain, route), ctx.nodes.size(), channels,
                   bytes, out);
  }
}
}  // namespace

CollectivePlan plan_collective(const Fabric& fabric, const CollectiveConfig& config,
                               const CollectiveRequest& request, PlanShapes* shapes) {
  validate(fabric, request);
  Context ctx{fabric, config, request, group_by_node(fabric, request.ranks),
              config.timing == CollectiveTiming::link_level, static_cast<int>(request.ranks.size())};
  const CommunicatorFacts facts = communicator_facts(fabric, request.ranks);
  CollectivePlan plan;
  plan.op = request.op;
  plan.ranks = ctx.n;
  plan.nodes = static_cast<int>(ctx.nodes.size());
  plan.bytes = request.bytes;
  plan.calibration = ctx.link_level ? "link-level" : config.calibration_for(facts.compute_capability).name;
  const NcclTuner tuner(facts);
  plan.nccl_channels = tuner.graphs().runtime_channels;

  const bool p2p = request.op == CollectiveOp::all_to_all || request.op == CollectiveOp::send_recv;
  if (request.algorithm && p2p != (*request.algorithm == Algorithm::direct)) {
    unavailable(request, fmt::format("algorithm {}", to_string(*request.algorithm)),
                "all_to_all and send_recv run as direct point-to-point; the others never do");
  }
  if (p2p) {
    plan_direct(ctx, plan, facts);
    return plan;
  }
  if (ctx.n == 1) {
    // One rank: NCCL still launches a kernel (a local copy when out of place); no network.
    PlannedPhase ph;
    const auto& cal = config.calibration_for(facts.compute_capability);
    if (!ctx.link_level) ph.start_delay = us(cal.launch_us);
    plan.predicted_us = ctx.link_level ? 0.0 : cal.launch_us;
    plan.algorithm = request.algorithm.value_or(Algorithm::ring);
    plan.phases.push_back(std::move(ph));
    return plan;
  }
  if (request.algorithm == Algorithm::hierarchical) {
    if (request.op != CollectiveOp::all_reduce || ctx.nodes.size() < 2) {
      unavailable(request, "algorithm hierarchical", "it is an all_reduce across two or more nodes");
    }
    plan_hierarchical(ctx, plan);
    return plan;
  }

  Algorithm algo = Algorithm::ring;
  Protocol proto = Protocol::simple;
  if (ctx.link_level) {
    algo = request.algorithm.value_or(Algorithm::ring);
    proto = request.protocol.value_or(Protocol::simple);
    const bool ok = algo == Algorithm::ring || (algo == Algorithm::tree && request.op == CollectiveOp::all_reduce) ||
                    (algo == Algorithm::pat && tuner.available(request.op, algo, Protocol::simple)) ||
                    ((algo == Algorithm::nvls || algo == Algorithm::nvls_tree) &&
                     tuner.available(request.op, algo, Protocol::simple));
    if (!ok) unavailable(request, fmt::format("algorithm {}", to_string(algo)), "see NCCL's availability rules");
  } else {
    std::tie(algo, proto) = choose(ctx, tuner);
  }
  plan.algorithm = algo;
  plan.protocol = proto;

  std::optional<Timing> timing;
  if (!ctx.link_level) {
    const auto cost = tuner.cost(request.op, algo, proto, request.bytes);
    plan.nccl_us = cost.time_us();
    timing = calibrated(cost, config.calibration_for(facts.compute_capability), proto, request.bytes, true);
  }
  Timing* t = timing ? &*timing : nullptr;
  const double s = request.bytes;
  const double n = ctx.n;
  const int rails = ring_channels(ctx, facts);
  switch (algo) {
    case Algorithm::ring:
    case Algorithm::pat:
      if (request.op == CollectiveOp::broadcast || request.op == CollectiveOp::reduce) {
        // Pipelined chain from (broadcast) or to (reduce) the root along each channel's ring.
        std::vector<PlannedFlow> flows;
        const auto rings = build_rings(fabric, ctx.nodes, rails);
        const auto pos = detail::node_positions(ctx.nodes);
        const GpuId root = request.ranks[static_cast<std::size_t>(request.root)];
        for (std::size_t c = 0; c < rings.size(); ++c) {
          const auto& order = rings[c].order;
          const auto rp = static_cast<std::size_t>(std::find(order.begin(), order.end(), root) - order.begin());
          for (std::size_t k = 0; k + 1 < order.size(); ++k) {
            const GpuId a = order[(rp + k) % order.size()];
            const GpuId b = order[(rp + k + 1) % order.size()];
            const bool bcast = request.op == CollectiveOp::broadcast;
            flows.push_back(flow(fabric, ctx.nodes, pos, bcast ? a : b, bcast ? b : a,
                                 s / static_cast<double>(rings.size()), static_cast<int>(c)));
          }
        }
        plan.channels = static_cast<int>(rings.size());
        plan.phases.push_back(flow_phase(ctx, std::move(flows), proto, t));
      } else {
        auto rings = shapes == nullptr
                         ? build_rings(fabric, ctx.nodes, rails)
                         : shapes->rings(request.ranks, rails, [&] { return build_rings(fabric, ctx.nodes, rails); });
        const int steps = request.op == CollectiveOp::all_reduce ? 2 * (ctx.n - 1) : ctx.n - 1;
        plan.channels = static_cast<int>(rings.size());
        const double per_step = s / (n * static_cast<double>(rings.size()));
        plan.phases.push_back(ring_phase(ctx, std::move(rings), steps, per_step, proto, t));
      }
      break;
    case Algorithm::tree: {
      std::vector<PlannedFlow> flows;
      add_trees(ctx, shapes, rails, s, true, flows);
      plan.channels = ctx.nodes.size() == 1 ? 1 : rails;
      plan.phases.push_back(flow_phase(ctx, std::move(flows), proto, t));
      break;
    }
    case Algorithm::nvls:
    case Algorithm::nvls_tree: {
      // Per GPU (nccl-model.md sec. 6, NVLS): all_reduce = multimem reduce-scatter (S out, S/p
      // back) + multimem all-gather (S/p out, S back); all_gather S/p out, S back;
      // reduce_scatter S out, S/p back. p = GPUs of the node.
      std::vector<PlannedFlow> flows;
      const double p = static_cast<double>(facts.ranks_per_node);
      double up = s + s / p;
      double down = s / p + s;
      if (request.op == CollectiveOp::all_gather) up = s / p, down = s;
      if (request.op == CollectiveOp::reduce_scatter) up = s, down = s / p;
      add_nvls_flows(fabric, ctx.nodes, up, down, flows);
      if (algo == Algorithm::nvls_tree) add_trees(ctx, shapes, rails, s, false, flows);
      plan.channels = tuner.graphs().nvls.channels;
      plan.phases.push_back(flow_phase(ctx, std::move(flows), proto, t));
      break;
    }
    default:
      throw InternalError(fmt::format("plan_collective: no planner for {}", to_string(algo)));
  }
  if (t != nullptr) plan.predicted_us = t->total();
  return plan;
}

}  // namespace foresight::sim
