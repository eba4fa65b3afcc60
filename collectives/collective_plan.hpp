#pragma once
/// Planning a collective: a pure function from (cluster, configuration, request) to the phases
/// of flows that CollectiveEngine executes. Planning picks the algorithm and protocol (NCCL's
/// choice, or the request's hint), builds the rings / trees / NVLink-SHARP transfers on the
/// topology's routes, and sets each flow's bytes, rate cap and latency so that an uncontended
/// run takes exactly the calibrated time of collectives/collective_config.hpp; concurrent traffic then
/// slows it through the network model.

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/collective_config.hpp"
#include "collectives/collective_types.hpp"
#include "net/fabric.hpp"
#include "common/units.hpp"

namespace foresight::sim {

struct CollectiveRequest {
  CollectiveOp op = CollectiveOp::all_reduce;
  /// The communicator: GPUs in rank order. send_recv: {source, destination}.
  std::vector<GpuId> ranks;
  /// Size in NCCL's convention (collectives/collective_types.hpp), bytes.
  double bytes = 0.0;
  /// Rank (index into `ranks`) of the root of broadcast and reduce.
  int root = 0;
  std::optional<Algorithm> algorithm;  ///< a hint; must be available for this communicator
  std::optional<Protocol> protocol;    ///< a hint; must be available with the algorithm
  /// all_to_all only: bytes from rank i to rank j at [i * n + j] (all_to_allv); empty means
  /// `bytes` / n to every peer.
  std::vector<double> send_matrix;
};

/// A flow of a concurrent phase.
struct PlannedFlow {
  std::vector<LinkId> path;
  double bytes = 0.0;  ///< bytes on the wire (protocol overhead included)
  double cap = 0.0;    ///< rate cap, bytes/s (+inf for none)
  Time latency;        ///< added after the flow drains
  std::uint32_t weight = 1;  ///< identical flows it stands for (FlowRequest::weight)
};

/// A ring of a ring phase: the GPUs in ring order, and for hop pos -> pos+1 its path and latency.
struct PlannedRing {
  std::vector<GpuId> order;
  std::vector<std::vector<LinkId>> hops;
  std::vector<Time> hop_latency;
  /// Identical rings it stands for: channels over the same links with the same latencies move
  /// in lock step, so one ring whose flows each stand for `weight` (FlowRequest::weight) runs
  /// them all.
  std::uint32_t weight = 1;
};

struct PlannedPhase {
  enum class Kind : std::uint8_t { ring, flows };
  Kind kind = Kind::flows;
  Time start_delay;  ///< before the phase's first transfer
  // Ring phases: every position sends `steps` steps of `step_bytes` to its successor; step k
  // needs step k-1 from its predecessor (data) and its own step k-1 sent.
  std::vector<PlannedRing> rings;
  int steps = 0;
  double step_bytes = 0.0;
  double step_cap = 0.0;
  // Flow phases: all flows start together; the phase ends when every flow has arrived.
  std::vector<PlannedFlow> flows;
};

struct CollectivePlan {
  CollectiveOp op = CollectiveOp::all_reduce;
  Algorithm algorithm = Algorithm::ring;
  Protocol protocol = Protocol::simple;
  int ranks = 0;
  int nodes = 0;
  double bytes = 0.0;
  int channels = 0;            ///< channels simulated (rings, trees or NVLS heads)
  int nccl_channels = 0;       ///< NCCL's run-time channel count for the communicator
  double nccl_us = 0.0;        ///< NCCL's own model for this call; 0 when it has none
  double predicted_us = 0.0;   ///< uncontended time per the calibrated closed form (nccl timing)
  std::string calibration;     ///< name of the calibration used
  std::vector<PlannedPhase> phases;
};

/// Where a communicator's rings and trees run does not depend on the size: the same members over
/// the same channels take the same routes. A caller that plans one communicator at many sizes (the
/// executor: a bucket, a layer's output, each its own size) keeps the routed rings and tree paths
/// here, so each is routed once, on one fabric. The plans are the same as without it, link for
/// link.
class PlanShapes {
 public:
  /// The rings of `ranks` over `channels` channels: `make()` the first time, then its copy.
  template <typename Make>
  const std::vector<PlannedRing>& rings(const std::vector<GpuId>& ranks, int channels, Make&& make) {
    auto key = std::make_tuple(ranks, channels);
    auto it = rings_.find(key);
    if (it == rings_.end()) it = rings_.emplace(std::move(key), make()).first;
    return it->second;
  }
  /// The paths of the double-binary-tree flows of `ranks` (with or without the chains inside each
  /// node) over `channels` channels, in the order `make()` gives them the first time.
  template <typename Make>
  const std::vector<std::vector<LinkId>>& tree_paths(const std::vector<GpuId>& ranks, int channels,
                                                     bool intra_chain, Make&& make) {
    auto key = std::make_tuple(ranks, channels, intra_chain);
    auto it = trees_.find(key);
    if (it == trees_.end()) it = trees_.emplace(std::move(key), make()).first;
    return it->second;
  }

 private:
  std::map<std::tuple<std::vector<GpuId>, int>, std::vector<PlannedRing>> rings_;
  std::map<std::tuple<std::vector<GpuId>, int, bool>, std::vector<std::vector<LinkId>>> trees_;
};

/// Plans `request` on `fabric`. ConfigError for an invalid request (empty or repeated ranks, a
/// root out of range, an algorithm or protocol hint that is unavailable, with the reason). With
/// `shapes`, rings and trees routed before for the same members are taken from it (and new ones
/// kept there); `shapes` must only ever see this `fabric`.
CollectivePlan plan_collective(const Fabric& fabric, const CollectiveConfig& config,
                               const CollectiveRequest& request, PlanShapes* shapes = nullptr);

/// Bytes on the wire per payload byte for an NCCL protocol: LL sends a 4-byte flag with every 4
/// data bytes (x2), LL128 a flag word per 120 data bytes (x128/120), Simple none (#281).
double protocol_wire_factor(Protocol p);

/// Parent of node `r` of `n` in NCCL's double binary tree `tree` (0 or 1); -1 at a root. Tree 0
/// is an in-order binary tree; tree 1 its mirror (even n) or its shift by one (odd n), so that
/// each node is a leaf in one tree (nccl-model.md sec. 6; NCCL src/graph/trees.cc).
int double_tree_parent(int r, int n, int tree);

}  // namespace foresight::sim
