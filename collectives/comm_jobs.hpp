#pragma once
/// Communication jobs on the network. A job is a collective together with every group a folded
/// communicator stands for, or a point-to-point transfer together with its mirrors
/// (exec/execution_graph.hpp): its plans start together and it ends when the last one has.
///
/// A job that meets no contention when it starts runs in closed form: its duration alone,
/// computed once per job, says when it ends, and none of its flows enters the network. On the
/// analytical network that is always so, links sampled or not (jobs never meet, nor do the groups
/// of a folded job; a sampled link gets each job's bytes when it starts), and its duration alone
/// is its slowest group's: the closed form of collectives/plan_timing.hpp where the group's own
/// flows never crowd a link, else a run of that group on a network of its own (an all-to-all's
/// flows share each GPU's links there, as on the flow-level network). On the flow-level network a
/// job meets contention when a link it shares with running jobs lacks room for all of their flows at their standalone rates
/// (leaves_room; a link with room never limits a flow, so jobs that share only such links run as
/// if alone). Its duration alone is the closed form when its own flows never crowd a link
/// (keeps_standalone_rates), else the time of a run of its plans on a network of their own. When
/// a later job crowds one of its links, the job is rebuilt where it stands: its plans run on
/// their own network from its start to now (nothing crowded its links meanwhile, so that run is
/// what happened), and their flows, progress and pending events move into the shared network,
/// where the job goes on flow by flow among the others; a job crowded when it starts runs flow
/// by flow from its start. That run replays one plan of each class of alike plans
/// (collectives/plan_classes.hpp) and copies its state onto the others. When a job it shared links with ends and nothing crowds it any more
/// (the same test, against the jobs still running), a job running flow by flow goes back to
/// closed form from where it stands. When its own flows keep their standalone rates, its flows
/// in flight leave when the network has them leave, and the rest follows from each ring
/// position's state (CollectiveEngine::end_alone, ring_end_from); when they crowd each other (an
/// all-to-all's), its end is a run of its plans on a network of their own from that state (one
/// replay per class of alike plans in equal states). Its flows leave the network
/// and its state is kept, so that a later job that crowds it rebuilds it from there. So every
/// job is simulated flow by flow exactly while it meets contention, and one that never does
/// costs a few events, whatever the number of GPUs, steps and groups.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "collectives/collective_engine.hpp"
#include "collectives/collective_plan.hpp"
#include "collectives/plan_classes.hpp"
#include "net/flow_network.hpp"
#include "net/link_efficiency.hpp"
#include "net/link_pools.hpp"
#include "net/network_model.hpp"
#include "collectives/plan_timing.hpp"
#include "common/flat_map.hpp"
#include "sim/simulator.hpp"

namespace foresight::sim {

class CommJobs final : private EventHandler {
 public:
  /// Runs jobs on `fabric` (which must outlive this) under a network model of `kind`; with
  /// `closed_form` false every job runs flow by flow (link sampling needs every flow's bytes).
  CommJobs(Simulator& sim, NetworkKind kind, const Fabric& fabric, const LinkEfficiency& efficiency,
           bool closed_form);
  CommJobs(const CommJobs&) = delete;
  CommJobs& operator=(const CommJobs&) = delete;
  ~CommJobs() override;

  /// Plans of a job, over fabric links: one per group or mirror.
  using PlanSource = std::function<std::vector<CollectivePlan>()>;
  /// Starts job `job` now. Jobs are numbered by the caller, densely from 0; one number always
  /// names the same plans, which `plans` gives the first time they are needed. `done` is
  /// scheduled when the job ends.
  void start(std::uint32_t job, const PlanSource& plans, FlowNotify done);

  /// Bytes carried so far by a fabric link (its pool's, under adaptive routing).
  double link_bytes(LinkId link) const;

  struct Stats {
    std::uint64_t closed_form = 0;   ///< jobs that started alone on their links
    std::uint64_t flow_by_flow = 0;  ///< jobs that started among others
    std::uint64_t rebuilt = 0;       ///< closed-form jobs continued flow by flow
    std::uint64_t returned = 0;      ///< flow-by-flow jobs back in closed form once alone again
    std::uint64_t own_runs = 0;      ///< runs of a job's plans on a network of their own
    std::uint64_t plans_copied = 0;  ///< rebuilt plans copied from an alike plan's replay
    /// Analytical: plans whose time alone an alike plan's run gave (one run per shape).
    std::uint64_t plans_alone_reused = 0;
    /// Jobs of two or more plans (a folded collective's groups, a folded transfer's mirrors)
    /// whose plans did not all end at the same instant, and the longest time from a job's first
    /// plan's end to its last's. Zero: every folded group ended with its representative, so the
    /// folded run is the unfolded one (each replica's timeline stayed its representative's).
    std::uint64_t uneven_jobs = 0;
    Time uneven_spread;
  };
  const Stats& stats() const noexcept { return stats_; }

 private:
  struct Job {
    bool built = false;
    std::vector<std::shared_ptr<const CollectivePlan>> plans;  ///< over pools
    std::uint32_t footprint = 0;                               ///< its pools, interned
    std::vector<LinkLoad> load;                                ///< flow-level: per pool, by pool
    std::optional<Time> alone;                                 ///< duration alone, once known
    Time alone_first;  ///< alone: when its first plan ends (its shortest plan's duration)
    std::optional<bool> keeps_alone;  ///< flow-level: its own flows never crowd a link
    std::vector<std::shared_ptr<const CollectivePlan>> local_plans;  ///< over its footprint's places, once needed
    /// Flow-level, once a rebuild needs them: its alike plans (collectives/plan_classes.hpp),
    /// none when no two are alike or two share a link without room.
    bool classified = false;
    std::optional<PlanClasses> classes;
    /// Analytical, links sampled: the bytes its plans put on each pool, once needed.
    std::vector<std::pair<LinkId, double>> bytes_on_pools;
  };
  /// A job's state when it went back to closed form: per running plan, its progress, pending
  /// events and flows in flight (their links are pools, their notifications' data the local
  /// index in the plan), as of `at`.
  struct Resume {
    Time at;
    struct Plan {
      std::uint32_t plan = 0;
      CollectiveEngine::Progress progress;
      std::vector<CollectiveEngine::PendingEvent> events;
      std::vector<FlowNetwork::FlowState> flows;
    };
    std::vector<Plan> plans;
  };
  struct Active {
    std::uint32_t job = 0;
    Time start;
    bool closed = false;  ///< in closed form: ends at `end` unless rebuilt
    Time end;
    FlowNotify done;
    std::uint32_t pending = 0;  ///< flow by flow: plans still running
    std::uint32_t generation = 0;
    std::vector<std::uint32_t> instances;  ///< flow by flow: each plan's engine instance, or kNone
    std::unique_ptr<Resume> resume;        ///< closed again after running flow by flow: from here
    bool may_return = true;  ///< no return has failed to pay for itself (rebuild)
    /// The earliest end of one of its plans seen so far, and, while in closed form, when its
    /// first plan ends in that form (kept if the form holds to the job's end).
    std::optional<Time> first_end;
    std::optional<Time> closed_first;
  };
  static constexpr std::uint32_t kNone = 0xffffffffU;
  struct OwnRun;
  enum EventKind : std::uint32_t { kClosedDone = 1, kPlanDone, kReturn };

  void handle(Simulator& sim, const Event& event) override;
  static std::uint64_t plan_done_data(std::uint32_t slot, std::size_t plan) {
    return (static_cast<std::uint64_t>(plan) << 32) | slot;
  }
  Job& build(std::uint32_t job, const PlanSource& plans);
  /// Analytical, links sampled: adds the bytes of `job`'s plans to their pools.
  void credit(Job& job);
  Time alone(std::uint32_t job);
  /// Analytical: the time of plan `plan` of `job` on a network of its own, without the others.
  Time plan_alone(Job& job, std::size_t plan);
  /// Pools two footprints share (cached).
  const std::vector<LinkId>& shared(std::uint32_t footprint_a, std::uint32_t footprint_b);
  /// Slots of the running jobs (but `self`) that a job starting now must not leave in closed
  /// form; sets `crowded` when the job itself must run flow by flow.
  std::vector<std::uint32_t> contended(const Job& job, bool& crowded, std::uint32_t self = kNone);
  void run_flow_by_flow(std::uint32_t slot);
  void rebuild(std::uint32_t slot);
  void finish(std::uint32_t slot);
  /// One of a's plans ended at `t` (Active::first_end).
  static void note_end(Active& a, Time t);
  /// Jobs running flow by flow that shared links with jobs ending now go back to closed form
  /// where nothing crowds them any more (return_to_closed_form).
  void check_returns();
  void return_to_closed_form(std::uint32_t slot);
  /// A network of the job's own links (numbered by their place in its footprint), its plans
  /// on them in local_plans, nothing started.
  std::unique_ptr<OwnRun> empty_run(Job& job);
  /// Per plan, the plans a replay of it stands for (itself first), empty for a plan it does not
  /// replay (another's replay stands for it).
  using Replays = std::vector<std::vector<std::uint32_t>>;
  /// The job's plans on a network of their own, started at its time 0: all of them, or only
  /// those `replays` runs.
  std::unique_ptr<OwnRun> own_run(Job& job, const Replays* replays = nullptr);
  /// The job's plans on a network of their own, in the state `resume` holds, at its time 0
  /// (only those `replays` runs).
  std::unique_ptr<OwnRun> resumed_run(Job& job, const Resume& resume, const Replays& replays);
  /// Sets job.classes, once.
  void classify(Job& job);
  /// What a rebuild of `a` replays: one plan of each class of alike plans, from its start; from
  /// where it went back to closed form, one of those alike plans whose states are equal too (a
  /// crowd may have slowed some of them); each plan for itself without classes.
  Replays replays(const Job& job, const Active& a) const;

  Simulator& sim_;
  NetworkKind kind_;
  bool closed_form_;
  LinkPools pools_;
  StandaloneLoadScratch load_scratch_;  ///< standalone_load's accumulators, reused
  /// Analytical: the time alone of each plan shape run so far (plan_shape).
  std::map<std::vector<std::uint64_t>, Time> alone_by_shape_;
  /// Analytical, links sampled: bytes of the jobs started so far, per pool (credited at the
  /// start, as the analytical network credits a flow's).
  std::vector<double> credited_;
  std::unique_ptr<NetworkModel> network_;
  FlowNetwork* flow_ = nullptr;  ///< network_ when it is the flow-level model
  CollectiveEngine engine_;
  HandlerId self_;
  std::vector<Job> jobs_;
  std::vector<std::vector<LinkId>> footprints_;  ///< sorted pools, by footprint id
  std::vector<std::uint8_t> in_footprint_;        ///< per pool, while build() gathers a footprint
  std::map<std::vector<LinkId>, std::uint32_t> footprint_ids_;
  /// Pools two footprints share (shared()): per pair (lower id in the high word), an index into
  /// shared_, whose first list is the empty one. Looked up for every running job at each start,
  /// so pairs of the first kDenseFootprints footprints (most scenarios have a few hundred) are
  /// in a dense table instead: the index + 1, 0 until worked out.
  struct PairHash {
    std::size_t operator()(std::uint64_t k) const noexcept { return static_cast<std::size_t>(k ^ (k >> 29)); }
  };
  FlatMap<std::uint64_t, std::uint32_t, PairHash> shared_index_;
  static constexpr std::uint32_t kDenseFootprints = 512;
  std::vector<std::uint32_t> shared_dense_;  ///< kDenseFootprints x kDenseFootprints, by (lower, higher)
  /// A deque: shared() hands out references that outlive later insertions.
  std::deque<std::vector<LinkId>> shared_ = std::deque<std::vector<LinkId>>(1);
  std::vector<Active> actives_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<std::uint32_t> running_;  ///< slots of started, unfinished jobs, in start order
  std::vector<std::uint32_t> ended_now_;  ///< footprints of jobs that ended at this instant
  // Scratch of contended(): per pool, the load of the jobs sharing it, valid where marked.
  std::vector<LinkLoad> total_;
  std::vector<std::uint64_t> total_mark_;
  std::uint64_t contended_calls_ = 0;
  bool return_check_pending_ = false;
  Stats stats_;
};

}  // namespace foresight::sim
