#pragma once
/// The executor's running compute ops and their speed. A compute op runs at full speed, or at
/// 1 / (1 + its slowdown) while its rank communicates (ExecutorOptions::comm_compute_slowdown and
/// comm_compute_slowdown_by_type: SMs and memory shared with NCCL's kernels). When a rank starts
/// or stops communicating, its running ops keep the work done so far and get a new end; each end
/// carries a generation so that the executor ignores the event of an end that moved.

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/units.hpp"
#include "exec/execution_graph.hpp"

namespace foresight::sim::detail {

class ComputeRates {
 public:
  explicit ComputeRates(std::size_t ranks) : comm_active_(ranks, 0), running_(ranks) {}

  /// When an op ends, counted from now, and the generation its end event carries.
  struct End {
    Time after;
    std::uint32_t generation = 0;
  };

  /// Compute op `n` of rank `r` starts now with `duration` of work, slowed by `slowdown` while
  /// its rank communicates.
  End start(NodeId n, RankId r, Time duration, double slowdown, Time now);
  /// Whether an end event of op `n` with `generation` is its current end.
  bool current(NodeId n, std::uint32_t generation) const;
  /// Op `n` of rank `r` has ended.
  void finish(NodeId n, RankId r);
  /// Rank `r`'s running ops, in the order they started.
  const std::vector<NodeId>& running(RankId r) const { return running_[r]; }

  /// Rank `r` starts (+1) or stops (-1) a communication now. Where that changes the rank's
  /// speed, `reschedule(n, end)` is called for each of its running ops, in the order they started.
  template <typename F>
  void comm_changed(RankId r, int delta, Time now, F&& reschedule) {
    const bool was = comm_active_[r] > 0;
    comm_active_[r] += delta;
    const bool is = comm_active_[r] > 0;
    if (was == is || !any_slowdown_) return;  // the common case where nothing slows: no lookups
    for (const NodeId n : running_[r]) {
      const Op& op = ops_.at(n);
      if (op.slowdown == 0.0) continue;
      reschedule(n, respeed(n, now, is ? 1.0 / (1.0 + op.slowdown) : 1.0));
    }
  }

 private:
  struct Op {
    double remaining_ps = 0.0;
    double rate = 1.0;
    double slowdown = 0.0;
    Time updated;
    std::uint32_t generation = 0;
  };
  End respeed(NodeId n, Time now, double rate);
  End next_end(Op& op);

  bool any_slowdown_ = false;  ///< some op started with a slowdown above 0
  std::vector<int> comm_active_;
  std::vector<std::vector<NodeId>> running_;  ///< per rank, in start order
  std::unordered_map<NodeId, Op> ops_;        ///< compute ops running now
  std::uint32_t next_generation_ = 1;
};

}  // namespace foresight::sim::detail
