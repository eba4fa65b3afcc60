#pragma once
/// Runs planned collectives (collectives/collective_plan.hpp) on a network model. Several collectives
/// may run at once; their flows then contend in the network model.
///
/// Ring phases run step by step: position p sends step k to p+1 once it has received step k-1
/// from p-1 and has finished sending its own step k-1 (NCCL's channel sends are sequential); a
/// step arrives its hop latency after its last byte left. Flow phases start every flow at once
/// and end when the last one has arrived. A collective ends when its last phase ends.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "collectives/collective_plan.hpp"
#include "net/network_model.hpp"
#include "sim/simulator.hpp"

namespace foresight::sim {

class CollectiveEngine final : private EventHandler {
 public:
  CollectiveEngine(Simulator& sim, NetworkModel& network);
  CollectiveEngine(const CollectiveEngine&) = delete;
  CollectiveEngine& operator=(const CollectiveEngine&) = delete;
  ~CollectiveEngine() override;

  /// Starts `plan` now; `done` is scheduled when it completes. Returns its instance.
  std::uint32_t start(CollectivePlan plan, FlowNotify done);
  std::uint32_t start(std::shared_ptr<const CollectivePlan> plan, FlowNotify done);

  /// A running collective's progress, for moving it to another engine (CommJobs): its phase,
  /// and in a ring phase each (ring, position)'s steps sent and received, whether a send is
  /// under way and when its latest finished send left; in a flow phase when each flow left
  /// (Time::max() while in flight); the arrivals counted so far; when the next phase starts
  /// while it waits for it.
  struct Progress {
    std::uint32_t id = 0;  ///< its instance here; events and flow notifications carry it
    FlowNotify done;
    std::size_t phase = 0;
    std::uint32_t n = 0;
    std::vector<std::uint32_t> sent;
    std::vector<std::uint32_t> received;
    std::vector<std::uint8_t> busy;
    std::vector<Time> last_done;
    std::vector<Time> flow_done;
    std::uint64_t arrivals = 0;
    std::uint64_t expected = 0;
    bool waiting = false;  ///< between phases (or before the first): `phase` starts at phase_start
    Time phase_start;
    /// Moves its times `by` later (from one simulation's clock to another's).
    void shift(Time by);
    /// Whether `o` (of a plan alike, collectives/plan_classes.hpp) stands at the same place:
    /// every field but its instance and notification equal.
    bool same_place(const Progress& o) const;
  };
  std::vector<Progress> running_progress() const;
  Progress progress(std::uint32_t id) const;
  /// Resumes `plan` at `progress` (its id is ignored) and returns its instance here. Its pending
  /// events and flows are the caller's to re-create, with this instance in their data
  /// (event_data), and its flows' ids to give back (set_flow).
  std::uint32_t resume(std::shared_ptr<const CollectivePlan> plan, const Progress& progress);

  /// An event an instance has pending, as pending_events gives it.
  struct PendingEvent {
    Time time;
    std::uint32_t kind = 0;
    std::uint32_t local = 0;
  };
  /// The events instance `id` has pending when every event up to now has run (kinds and
  /// times from its progress: arrivals on their way, the next phase's start). Only for an
  /// instance whose progress tells them (progress_tells_pending).
  std::vector<PendingEvent> pending_events(std::uint32_t id) const;
  /// Whether instance `id`'s progress tells its pending events: on every ring hop at most one
  /// finished step is still on its way. A hop whose latency exceeds its steps' transfer time
  /// can have several, and the progress keeps the send time of the latest alone.
  bool progress_tells_pending(std::uint32_t id) const;
  /// Schedules `events` for instance `id` here, each `shift` earlier than its time.
  void schedule_pending(std::uint32_t id, const std::vector<PendingEvent>& events, Time shift);
  /// The flows instance `id` has in flight: (local index in its event data, flow id).
  std::vector<std::pair<std::uint32_t, FlowId>> in_flight(std::uint32_t id) const;
  /// Records that the flow of `local` (a ring position or a flow of the current phase) is `flow`.
  void set_flow(std::uint32_t id, std::uint32_t local, FlowId flow);
  /// When instance `id` ends if every flow from now on moves at its standalone rate on links of
  /// `capacity` (flow-level, weighted flows sharing their links), with each flow in flight
  /// leaving when `leaves` says (none when it does not know: the instance is then not
  /// computed). Every event up to now must have run. None when the state holds too little to
  /// tell (ring_end_from).
  std::optional<Time> end_alone(std::uint32_t id, const std::vector<double>& capacity,
                                const std::function<std::optional<Time>(FlowId)>& leaves) const;
  /// Drops instance `id` (its flows withdrawn by the caller): its pending events are ignored and
  /// it never notifies.
  void abandon(std::uint32_t id);

  HandlerId handler() const noexcept { return self_; }
  /// The data of this engine's events and flow notifications: the instance in the high word.
  static std::uint64_t event_data(std::uint32_t instance, std::uint32_t local) { return pack(instance, local); }
  static std::uint32_t event_instance(std::uint64_t data) { return static_cast<std::uint32_t>(data >> 32); }

  std::size_t running() const noexcept { return running_; }
  std::uint64_t flows_started() const noexcept { return flows_started_; }

 private:
  struct Instance;
  enum EventKind : std::uint32_t { kPhaseStart = 1, kRingSent, kRingArrived, kFlowSent, kFlowArrived };

  void handle(Simulator& sim, const Event& event) override;
  void begin_phase(std::uint32_t id);
  void end_phase(std::uint32_t id);
  void try_send(std::uint32_t id, std::uint32_t ring, std::uint32_t pos);
  std::uint32_t new_instance(std::shared_ptr<const CollectivePlan> plan, FlowNotify done);
  static std::uint64_t pack(std::uint32_t id, std::uint32_t local) {
    return (static_cast<std::uint64_t>(id) << 32) | local;
  }

  Simulator& sim_;
  NetworkModel& network_;
  HandlerId self_;
  std::vector<std::unique_ptr<Instance>> instances_;
  std::vector<std::uint32_t> free_;
  std::vector<std::uint8_t> abandoned_;  ///< by instance: its events are ignored, its id never reused
  std::size_t running_ = 0;
  std::uint64_t flows_started_ = 0;
};

}  // namespace foresight::sim
