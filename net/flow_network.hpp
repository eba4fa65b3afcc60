#pragma once
/// Flow-level network: concurrent flows share link bandwidth max-min fairly.
///
/// Rates are re-solved only around the links touched when flows start or end. All starts and
/// ends of one instant are batched into one re-solve (an event at priority::settle). The re-solve
/// runs progressive filling over the flows that a "dirty" link may move (those it was the
/// bottleneck of, and flows not solved yet), holding every other flow at its current rate, then
/// widens where the answer could be wrong: (1) the links of a flow whose rate changed become
/// dirty, (2) on the bottleneck link of a re-solved flow where a held flow runs faster than it,
/// every flow is re-solved. A held flow keeps its last bottleneck: a saturated link on which it
/// was among the fastest and whose flows and rates have not changed (else it would be dirty and
/// the flow re-solved). When neither rule widens the set, every flow has a saturated bottleneck
/// on which it is among the fastest, which characterizes THE max-min fair allocation (Bertsekas &
/// Gallager, Data Networks, 2nd ed., sec. 6.5.2), so the incremental answer equals a global
/// re-solve; tests/net/flow_network_test.cpp checks it against one on random instances. Links
/// with room to spare (a pooled spine, a NIC below its rate) hold nobody back, so their many
/// flows are not re-solved when one of them starts or ends.

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "net/network_model.hpp"
#include "sim/simulator.hpp"

namespace foresight::sim {

class FlowNetwork final : public NetworkModel, private EventHandler {
 public:
  FlowNetwork(Simulator& sim, std::vector<double> capacities);
  std::string_view name() const override { return "flow"; }
  FlowId start_flow(const FlowRequest& request) override;
  std::size_t active_flows() const override { return active_; }
  double link_bytes(LinkId id) const override;

  /// Current rate of an active flow in bytes/s (tests and diagnostics).
  double rate(FlowId id) const;
  /// An active flow as it stands, for moving a run from one network to another (CommJobs: a
  /// collective that ran alone continues among others): its links, bytes left as of `updated`,
  /// current rate (0 before its first re-solve), cap and notification.
  struct FlowState {
    std::vector<LinkId> path;
    double remaining = 0.0;
    double rate = 0.0;
    double max_rate = 0.0;
    Time updated;
    FlowNotify notify;
    std::uint32_t weight = 1;
  };
  /// The active flows, in slot order.
  std::vector<FlowState> active_flow_states() const;
  /// Links whose flows changed at the current instant and await its re-solve.
  const std::vector<LinkId>& pending_links() const { return dirty_; }
  /// Adds a flow in the state `f` (updated <= now), without marking its links for a re-solve;
  /// its completion is scheduled when its rate says (none while it is 0). Returns its id.
  FlowId adopt(const FlowState& f);
  /// Active flow `id` as it stands (InternalError for an id that is not active).
  FlowState flow_state(FlowId id) const;
  /// When active flow `id` leaves, if it moves at its standalone rate (its cap, or its slowest
  /// link's capacity shared with the identical flows it stands for) until then: the time its
  /// completion event says, re-scheduled as that event would for float noise. None when it
  /// moves slower (something holds it back) or is not active.
  std::optional<Time> leaves_alone(FlowId id) const;
  /// Removes active flow `id` without notifying anyone; its links are re-solved at this
  /// instant's settle.
  void withdraw(FlowId id);
  /// Marks link `l` for the current instant's re-solve.
  void touch(LinkId l) { mark_dirty(l); }

  /// Number of rate re-solves so far, and flows re-solved in total (benchmarks).
  std::uint64_t solves() const noexcept { return solves_; }
  std::uint64_t flows_resolved() const noexcept { return flows_resolved_; }

 private:
  struct Flow {
    std::vector<LinkId> path;
    std::vector<std::uint32_t> slot_in_link;  ///< position of this flow in each link's list
    double weight = 1.0;                      ///< identical flows it stands for
    double bound = 0.0;                       ///< its rate alone: min(cap, capacity / weight)
    double remaining = 0.0;                   ///< bytes left as of `updated`
    double rate = 0.0;                        ///< bytes/s
    double max_rate = 0.0;
    Time updated;
    std::uint32_t generation = 0;
    FlowNotify notify;
    bool active = false;
    // Scratch state of the current re-solve.
    std::uint64_t mark = 0;        ///< == epoch_ when in the re-solved set
    double old_rate = 0.0;         ///< rate before this settle began
    std::uint64_t old_mark = 0;    ///< == settle_ when old_rate is recorded
    double new_rate = 0.0;
    std::int64_t bottleneck = -1;  ///< link that froze it, -1 for its own cap, kUnsolved before its first solve
    bool frozen = false;
  };
  struct Link {
    double capacity = 0.0;
    std::vector<std::uint32_t> flows;  ///< active flows crossing it
    double carried = 0.0;              ///< bytes carried by finished flows and progress so far
    // Scratch state of the current re-solve.
    std::uint64_t dirty_mark = 0;  ///< == settle_ when the link is in the dirty set
    std::uint64_t full_mark = 0;   ///< == settle_ when every flow of the link is re-solved
    std::uint64_t fastest_mark = 0;  ///< == epoch_ when fastest_held is valid
    double fastest_held = -1.0;      ///< highest rate of its flows held at their rates (-1: none)
    std::uint64_t mark = 0;        ///< == epoch_ when residual/count are valid
    double residual = 0.0;
    double count = 0.0;  ///< weight of the re-solved flows not yet frozen
    std::uint64_t batch = 0;  ///< == the current batch of freezes when its level must move
    std::uint32_t version = 0;  ///< heap entries of another version are stale
    /// Its latest heap entry: version and value. While the link has re-solved flows that entry
    /// is in the heap, and its value is at most the link's level (solve()).
    std::uint32_t queued_version = 0;
    double queued = 0.0;
  };

  /// A link's level in progressive filling, its fair share as of its version.
  struct Level {
    double value;
    std::uint32_t id;
    std::uint32_t version;
  };

  enum EventKind : std::uint32_t { kSettle = 1, kFlowDone = 2 };
  static constexpr std::int64_t kUnsolved = -2;

  void handle(Simulator& sim, const Event& event) override;
  void mark_dirty(LinkId l);
  void request_settle();
  void settle();
  /// Progressive filling over `set` with every other flow held at its rate.
  void solve(const std::vector<std::uint32_t>& set);
  void advance(Flow& f);
  void schedule_done(std::uint32_t slot);
  void finish(std::uint32_t slot);
  /// Takes an active flow off its links and frees its slot (no notification).
  void release(std::uint32_t slot);
  static FlowState state_of(const Flow& f);
  void attach(std::uint32_t slot, bool dirty = true);
  std::uint32_t new_slot();
  double standalone_bound(const Flow& f) const;
  /// The active flow an id names (InternalError otherwise).
  std::uint32_t slot_of(FlowId id) const;
  void detach(std::uint32_t slot);

  Simulator& sim_;
  HandlerId self_;
  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<LinkId> dirty_;
  // Scratch of solve(): candidate link levels, links touched, flows' caps (cap, slot), links
  // whose level moves after a batch of freezes.
  std::vector<Level> heap_;
  std::vector<LinkId> touched_;
  std::vector<std::pair<double, std::uint32_t>> caps_;
  std::vector<LinkId> changed_;
  std::size_t active_ = 0;
  bool settle_pending_ = false;
  std::uint64_t settle_ = 1;  ///< id of the current settle (marks)
  std::uint64_t epoch_ = 1;   ///< id of the current solve (marks)
  std::uint64_t batches_ = 0;  ///< batches of freezes so far (Link::batch)
  std::uint64_t solves_ = 0;
  std::uint64_t flows_resolved_ = 0;
};

/// Reference solver for tests: the max-min fair rates of `paths` (with per-flow caps) on links of
/// `capacities`, by progressive filling from scratch.
std::vector<double> max_min_rates(const std::vector<double>& capacities,
                                  const std::vector<std::vector<LinkId>>& paths,
                                  const std::vector<double>& caps);

}  // namespace foresight::sim
