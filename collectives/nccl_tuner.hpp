#pragma once
/// A port of NCCL's own performance model (src/graph/tuning.cc, v2.30.7), which NCCL uses to pick
/// an algorithm and protocol for each collective call. Every table and rule here is cited to
/// docs/reference/nccl-model.md, which gives NCCL's file and line for each.
///
/// NCCL's model is a selector, not a predictor: against measured nccl-tests curves it is 30-55%
/// optimistic at mid sizes (see README, "Collectives"). CollectiveEngine therefore uses this
/// tuner for the choice, as NCCL does, and a calibrated timing on top of it.

#include <optional>
#include <span>
#include <string>

#include "collectives/collective_types.hpp"
#include "net/fabric.hpp"

namespace foresight::sim {

/// What NCCL's tuner sees of a communicator. Bandwidths are in NCCL's own units (GB/s with
/// NCCL's per-link speeds: NVLink 20 GB/s per lane on sm70/sm80, 20.6 on sm90; PCIe Gen4 x16
/// 24 GB/s; a NIC at its line rate).
struct CommunicatorFacts {
  int ranks = 1;
  int nodes = 1;
  int ranks_per_node = 1;        ///< most members on one node
  int compute_capability = 80;   ///< lowest among members (NCCL's minCompCap)
  bool nvlink_intra = false;     ///< members of a node talk over an NVSwitch (path type NVL)
  bool nvls = false;             ///< every member's NVSwitch supports NVLink SHARP
  int nvlink_lanes = 0;          ///< NVLink lanes per GPU (fewest among members)
  double intra_bw = 0.0;         ///< per-GPU intra-node bandwidth, NCCL units
  int rails = 0;                 ///< NICs the members of each node use (fewest over nodes)
  double nic_bw = 0.0;           ///< one NIC, NCCL units (GB/s of line rate)
  CpuVendor cpu = CpuVendor::other;
};

/// Derives the facts of the communicator made of `ranks` (GPU ids, in rank order).
CommunicatorFacts communicator_facts(const Fabric& fabric, std::span<const GpuId> ranks);

/// One of NCCL's search results: channels and per-channel bandwidth (GB/s).
struct NcclGraph {
  int channels = 0;
  double bw_intra = 0.0;
  double bw_inter = 0.0;
};

/// The graphs NCCL's topology search would produce for a communicator, and its run-time channel
/// count (comm->nChannels).
struct NcclGraphs {
  NcclGraph ring;
  NcclGraph tree;
  NcclGraph nvls;
  int runtime_channels = 0;
};
NcclGraphs derive_graphs(const CommunicatorFacts& facts);

/// The distinct rings NCCL's topology search finds for a communicator (before DupChannels
/// copies them): the ring and tree plans run one per search channel.
int ring_search_channels(const CommunicatorFacts& facts);

class NcclTuner {
 public:
  explicit NcclTuner(const CommunicatorFacts& facts);

  /// NCCL's latency (us) and algorithm bandwidth (GB/s, S / algbw = time) for one
  /// (collective, algorithm, protocol), before the size-dependent corrections; a bandwidth of 0
  /// means the combination is unavailable.
  struct Entry {
    double latency_us = 0.0;
    double algbw = 0.0;
    double busbw = 0.0;  ///< before NCCL's busBw -> algBw conversion
    double hop_intra_us = 0.0;  ///< per-step latency inside a node (after net overhead)
    double hop_inter_us = 0.0;  ///< per-step latency across nodes
    double base_us = 0.0;       ///< the algorithm/protocol base latency
  };
  const Entry& entry(CollectiveOp op, Algorithm a, Protocol p) const;
  bool available(CollectiveOp op, Algorithm a, Protocol p) const;

  /// NCCL's cost for S bytes with its size-dependent corrections: the tree correction factor
  /// (T 620-642) and the multi-node ring Simple latency factor (T 647-650).
  struct Cost {
    double latency_us = 0.0;
    double algbw = 0.0;
    double time_us() const;
    double bytes = 0.0;
  };
  Cost cost(CollectiveOp op, Algorithm a, Protocol p, double bytes) const;

  /// NCCL's choice for S bytes: the argmin of cost in NCCL's scan order (tree, ring, collnet,
  /// nvls, nvls_tree, pat) x (LL, LL128, Simple), a strictly smaller time winning
  /// (EN 2035-2044). nullopt for all_to_all and send_recv, for which NCCL has no model.
  struct Choice {
    Algorithm algorithm = Algorithm::ring;
    Protocol protocol = Protocol::simple;
    Cost cost;
  };
  std::optional<Choice> choose(CollectiveOp op, double bytes) const;

  const CommunicatorFacts& facts() const noexcept { return facts_; }
  const NcclGraphs& graphs() const noexcept { return graphs_; }

 private:
  void compute();

  CommunicatorFacts facts_;
  NcclGraphs graphs_;
  Entry table_[kCollectiveOpCount][kAlgorithmCount][kProtocolCount];
};

/// NCCL's integer log2 (floor; -1 for 0), include/utils.h.
int nccl_log2i(long long v);

}  // namespace foresight::sim
