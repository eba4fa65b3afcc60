#include "exec/executor.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <deque>

#include "collectives/comm_jobs.hpp"
#include "common/error.hpp"
#include "exec/detail/comm_starts.hpp"
#include "exec/detail/compute_rates.hpp"
#include "exec/detail/interpreter_locks.hpp"
#include "exec/detail/kernel_runs.hpp"
#include "exec/detail/work_queue.hpp"
#include "exec/graph_check.hpp"
#include "sim/simulator.hpp"

namespace foresight::sim {
namespace {

/// Whether any family, of any rank, holds its SMs from a collective (ExecutorOptions::comm_waits_for).
bool any_waits(const ExecutorOptions& o) {
  const auto any = [](const std::array<bool, kOpTypeCount>& w) { return std::any_of(w.begin(), w.end(), [](bool b) { return b; }); };
  return any(o.comm_waits_for) || std::any_of(o.comm_waits_for_by_rank.begin(), o.comm_waits_for_by_rank.end(), any);
}

constexpr NodeId kNone = 0xffffffffu;

bool is_comm(OpKind k) { return k == OpKind::collective || k == OpKind::send || k == OpKind::recv; }

/// Replays a checked graph: each host thread walks its rank's program in order (dispatching GPU
/// ops onto their streams, running host ops, blocking on dependencies), each stream runs its
/// issued ops in order, and completions release dependents. The parts with a job of their own
/// are in exec/detail/: interpreter locks, compute speed under communication, starting
/// collectives and transfers as communication jobs, and the deadlock report.
class Runner final : public EventHandler {
 public:
  Runner(const ExecutionGraph& g, const GraphIndex& index, const Fabric& fabric, const CollectiveConfig& config,
         NetworkKind network, const ExecutorOptions& options)
      : g_(g),
        index_(index),
        options_(options),
        self_(sim_.add_handler(*this, "executor")),
        jobs_(sim_, network, fabric, config.links,
              options.closed_form && !(!options.sample_links.empty() && options.sample_interval > Time::zero())),
        comms_(g, index, fabric, config, sim_, jobs_),
        rates_(g.ranks()),
        held_(g.ranks()),
        waits_(any_waits(options)),
        locks_(process_count(g, index), index.host_count) {
    const std::size_t n = g.nodes.size();
    deps_left_.resize(n);
    for (NodeId i = 0; i < n; ++i) deps_left_[i] = static_cast<std::uint32_t>(g.nodes[i].deps.size());
    issued_.assign(n, 0);
    done_.assign(n, 0);
    if (options.ready_times) {
      result_.ready.assign(n, Time::zero());
    } else {
      result_.recv_ready.assign(index.transfers.size(), Time::zero());
      result_.send_ready.assign(index.transfers.size(), Time::zero());
      result_.first_transfer = index.collective_count();
    }
    result_.start.assign(n, Time::zero());
    result_.end.assign(n, Time::zero());
    result_.ranks.assign(g.ranks(), RankTotals{});
    streams_.resize(index.stream_count);
    hosts_.resize(index.host_count);
    // Every host's program in one array (host by host, each in graph order), whole huge pages.
    std::vector<std::size_t> fill(hosts_.size() + 1, 0);
    for (NodeId i = 0; i < n; ++i) ++fill[g.rank_host[g.nodes[i].rank] + 1];
    for (std::uint32_t h = 0; h < hosts_.size(); ++h) {
      fill[h + 1] += fill[h];
      hosts_[h].pc = fill[h];
      hosts_[h].end = fill[h + 1];
    }
    programs_.resize(n);
    for (NodeId i = 0; i < n; ++i) programs_[fill[g.rank_host[g.nodes[i].rank]]++] = i;
  }

  ExecutionResult run() {
    for (std::uint32_t h = 0; h < hosts_.size(); ++h) sim_.schedule_at(Time::zero(), self_, kHost, h);
    sampling_ = !options_.sample_links.empty() && options_.sample_interval > Time::zero();
    sample_interval_ = options_.sample_interval;
    result_.link_bytes.assign(sampling_ ? options_.sample_links.size() : 0, {});
    if (sampling_) sim_.schedule_at(Time::zero(), self_, kSample, 0, priority::after_settle);
    sim_.run();
    detail::report_deadlock(g_, index_, comms_, done_, issued_, deps_left_);
    result_.events = sim_.events_processed();
    result_.jobs_closed_form = jobs_.stats().closed_form;
    result_.jobs_flow_by_flow = jobs_.stats().flow_by_flow;
    result_.jobs_rebuilt = jobs_.stats().rebuilt;
    result_.jobs_returned = jobs_.stats().returned;
    result_.plans_copied = jobs_.stats().plans_copied;
    result_.plans_alone_reused = jobs_.stats().plans_alone_reused;
    result_.folded_uneven = jobs_.stats().uneven_jobs;
    result_.folded_spread = jobs_.stats().uneven_spread;
    result_.fingerprint = sim_.fingerprint();
    for (const Time t : result_.end) result_.makespan = std::max(result_.makespan, t);
    return std::move(result_);
  }

  void handle(Simulator& /*sim*/, const Event& e) override {
    switch (e.kind) {
      case kHost:
        work_.push_back({Work::resume_host, static_cast<std::uint32_t>(e.data)});
        break;
      case kIssue: {
        const auto n = static_cast<NodeId>(e.data);
        if (!hold_launch(n, 0)) launch_returns(n);
        break;
      }
      case kIssuePart: {
        const auto n = static_cast<NodeId>(e.data & 0xffffffffULL);
        const auto j = static_cast<std::uint32_t>(e.data >> 32);
        if (!hold_launch(n, j)) part_returns(n, j);
        break;
      }
      case kPartsIssued: {
        const auto n = static_cast<NodeId>(e.data);
        HostState& h = hosts_[host_of(n)];
        push_parts(n, g_.kernels(g_.nodes[n]) - h.part);
        next_op(h);
        work_.push_back({Work::resume_host, host_of(n)});
        break;
      }
      case kPartEnd: {
        const auto s = static_cast<std::uint32_t>(e.data);
        StreamState& st = streams_[s];
        st.part_event = false;
        if (!st.blocked.empty()) {  // a kernel of the running node ended: room for one launch
          release(st.blocked.front());
          st.blocked.pop_front();
          watch_parts(s);
        }
        break;
      }
      case kDone: {
        const auto n = static_cast<NodeId>(e.data & 0xffffffffULL);
        const auto gen = static_cast<std::uint32_t>(e.data >> 32);
        const Node& node = g_.nodes[n];
        if (node.kind == OpKind::compute && !rates_.current(n, gen)) return;  // its end moved
        if (node.stream == kHostStream) {
          HostState& h = hosts_[host_of(n)];
          h.busy = false;
          ++h.pc;
          work_.push_back({Work::complete, n});
          work_.push_back({Work::resume_host, host_of(n)});
        } else {
          work_.push_back({Work::complete, n});
        }
        break;
      }
      case kCollectiveDone: {
        const auto c = static_cast<std::uint32_t>(e.data);
        for (const NodeId m : index_.members(c)) work_.push_back({Work::complete, m});
        break;
      }
      case kTransferDone: {
        const auto t = static_cast<std::uint32_t>(e.data);
        work_.push_back({Work::complete, index_.transfers[t].send});
        work_.push_back({Work::complete, index_.transfers[t].recv});
        break;
      }
      case kSample:
        for (std::size_t i = 0; i < options_.sample_links.size(); ++i) {
          result_.link_bytes[i].emplace_back(sim_.now(), jobs_.link_bytes(options_.sample_links[i]));
        }
        if (result_.link_bytes.front().size() >= ExecutorOptions::kMaxLinkSamples) thin_samples();
        // Keep sampling while anything else is pending; the last sample closes the run.
        if (sim_.pending() > 0) sim_.schedule_after(sample_interval_, self_, kSample, 0, priority::after_settle);
        return;
      case kGilRelease:
        if (const auto h = locks_.release(static_cast<std::uint32_t>(e.data))) work_.push_front({Work::resume_host, *h});
        break;
      default:
        throw InternalError(fmt::format("executor: unknown event kind {}", e.kind));
    }
    drain();
  }

 private:
  enum EventKind : std::uint32_t {
    kHost = 1, kIssue, kDone, kCollectiveDone, kTransferDone, kSample, kGilRelease, kIssuePart, kPartsIssued, kPartEnd
  };
  struct Work {
    enum Kind : std::uint8_t { issue, issue_parts, try_start, complete, resume_host } kind;
    std::uint32_t id;
    std::uint32_t count = 0;  ///< issue_parts: how many kernels of coalesced node `id`
  };
  struct HostState {
    std::size_t pc = 0;   ///< the next op of its program: programs_[pc .. end)
    std::size_t end = 0;
    bool busy = false;
    NodeId waiting = kNone;
    /// The coalesced node at `pc` has launched its kernels before this one (0: none yet).
    std::uint32_t part = 0;
  };
  /// A launch waiting for room in its stream's queue: node `node`'s kernel `part` (0: the node).
  struct Launch {
    NodeId node;
    std::uint32_t part;
  };
  struct StreamState {
    std::vector<NodeId> queue;  ///< issued ops; from `head` on, unfinished
    std::size_t head = 0;
    bool running = false;
    std::deque<Launch> blocked;  ///< launches waiting for room in the queue, in order
    /// Kernels launched and not finished, counting each kernel of a coalesced node (less those
    /// of the running node that have ended, found from its start: kernels_in_flight).
    std::uint64_t kernels = 0;
    /// Kernels launched whose arrival in the queue the work list has yet to process.
    std::uint64_t pending = 0;
    bool part_event = false;  ///< a kPartEnd event is pending
  };

  static std::uint32_t process_count(const ExecutionGraph& g, const GraphIndex& index) {
    std::uint32_t processes = index.host_count;
    for (const std::uint32_t p : g.host_process) processes = std::max(processes, p + 1);
    return processes;
  }
  std::uint32_t host_of(NodeId n) const { return g_.rank_host[g_.nodes[n].rank]; }
  std::uint32_t stream_of(NodeId n) const { return index_.stream_index(g_.nodes[n].rank, g_.nodes[n].stream); }
  /// Op `n` is ready now: recorded for every node, or for receives only (ExecutorOptions::ready_times).
  void mark_ready(NodeId n, const Node& node) {
    if (options_.ready_times) {
      result_.ready[n] = sim_.now();
    } else if (node.kind == OpKind::recv) {
      result_.recv_ready[index_.transfer_of(n)] = sim_.now();
    } else if (node.kind == OpKind::send) {
      result_.send_ready[index_.transfer_of(n)] = sim_.now();
    }
  }
  std::uint32_t process_of(std::uint32_t h) const { return g_.host_process.empty() ? h : g_.host_process[h]; }

  /// Takes host `h`'s interpreter lock for `gil` (true), or queues `h` for it (false: the host
  /// resumes when the lock is released to it).
  bool acquire_gil(std::uint32_t h, Time gil) {
    if (gil <= Time::zero()) return true;
    const std::uint32_t p = process_of(h);
    if (!locks_.try_take(p, h)) return false;
    sim_.schedule_after(gil, self_, kGilRelease, p);
    return true;
  }

  void drain() {
    while (!work_.empty()) {
      const Work w = work_.pop_front();
      switch (w.kind) {
        case Work::issue_parts: {
          StreamState& st = streams_[stream_of(w.id)];
          st.kernels += w.count;
          st.pending -= w.count;
          break;
        }
        case Work::issue: {
          issued_[w.id] = 1;
          const std::uint32_t s = stream_of(w.id);
          streams_[s].queue.push_back(w.id);
          ++streams_[s].kernels;
          --streams_[s].pending;
          work_.push_back({Work::try_start, s});
          break;
        }
        case Work::try_start:
          try_start(w.id);
          break;
        case Work::complete:
          complete(w.id);
          break;
        case Work::resume_host:
          run_host(w.id);
          break;
      }
    }
  }

  void run_host(std::uint32_t h) {
    HostState& H = hosts_[h];
    while (!H.busy && H.pc < H.end) {
      const NodeId n = programs_[H.pc];
      const Node& node = g_.nodes[n];
      if (node.stream == kHostStream) {
        if (deps_left_[n] > 0) {
          H.waiting = n;  // the host blocks until the op's dependencies are done
          return;
        }
        H.waiting = kNone;
        mark_ready(n, node);
        result_.start[n] = sim_.now();
        if (node.kind == OpKind::host && node.duration > Time::zero()) {
          if (!acquire_gil(h, std::min(node.gil, node.duration))) return;
          H.busy = true;
          result_.ranks[node.rank].host += node.duration;
          sim_.schedule_after(node.duration, self_, kDone, n);
          return;
        }
        ++H.pc;
        complete(n);
        continue;
      }
      if (H.part > 0) {  // a coalesced node: its next kernels
        if (!launch_parts(h, n)) return;
        continue;
      }
      if (node.dispatch > Time::zero() && !acquire_gil(h, std::min(node.gil, node.dispatch))) return;
      if (node.run == kNoRun) {
        ++H.pc;
      } else {
        H.part = 1;
      }
      if (node.dispatch > Time::zero()) {
        H.busy = true;
        result_.ranks[node.rank].host += node.dispatch;
        sim_.schedule_after(node.dispatch, self_, kIssue, n);
        return;
      }
      if (hold_launch(n, 0)) {  // no dispatch time, but the launch waits for room
        H.busy = true;
        return;
      }
      push_issue(n);
    }
  }

  /// Op `n`'s launch returns: it reaches its stream's queue when the work list gets to it (a
  /// launch right after, without dispatch time, does not see it yet).
  void push_issue(NodeId n) {
    ++streams_[stream_of(n)].pending;
    work_.push_back({Work::issue, n});
  }
  /// `count` more kernels of coalesced node `n` are launched, as push_issue.
  void push_parts(NodeId n, std::uint32_t count) {
    streams_[stream_of(n)].pending += count;
    work_.push_back({Work::issue_parts, n, count});
  }

  /// The host moves past its current op.
  static void next_op(HostState& h) {
    h.part = 0;
    ++h.pc;
    h.busy = false;
  }

  /// Host `h` launches coalesced node `n`'s kernels from its `part` on, each after its dispatch,
  /// as it would launch them apart. Where the stream's queue has room for all of them, none can
  /// wait (only this host adds to it), so one event covers their dispatches; otherwise they go
  /// one by one. Returns whether the host may go on at once.
  bool launch_parts(std::uint32_t h, NodeId n) {
    HostState& H = hosts_[h];
    const Node& node = g_.nodes[n];
    const std::uint32_t count = g_.kernels(node);
    StreamState& st = streams_[stream_of(n)];
    const std::uint32_t left = count - H.part;
    if (options_.launch_queue_depth == 0 || kernels_in_flight(st) + st.pending + left <= options_.launch_queue_depth) {
      const Time dispatch = detail::run_dispatch(g_, node, H.part);
      if (dispatch <= Time::zero()) {
        push_parts(n, left);
        next_op(H);
        return true;
      }
      H.busy = true;
      result_.ranks[node.rank].host += dispatch;
      sim_.schedule_after(dispatch, self_, kPartsIssued, n);
      return false;
    }
    const Time dispatch = g_.part_dispatch[g_.part(node, H.part)];
    if (dispatch <= Time::zero()) {  // launched now, as apart
      if (hold_launch(n, H.part)) {
        H.busy = true;
        return false;
      }
      push_parts(n, 1);
      if (++H.part == count) next_op(H);
      return true;
    }
    H.busy = true;
    result_.ranks[node.rank].host += dispatch;
    sim_.schedule_after(dispatch, self_, kIssuePart, (static_cast<std::uint64_t>(H.part) << 32) | n);
    return false;
  }

  /// Coalesced node `n`'s kernel `j` (> 0) is launched: its host goes on.
  void part_returns(NodeId n, std::uint32_t j) {
    HostState& H = hosts_[host_of(n)];
    push_parts(n, 1);
    H.part = j + 1;
    H.busy = false;
    if (H.part == g_.kernels(g_.nodes[n])) next_op(H);
    work_.push_back({Work::resume_host, host_of(n)});
  }

  /// A launch that waited for room returns.
  void release(Launch l) {
    if (l.part == 0) {
      launch_returns(l.node);
    } else {
      part_returns(l.node, l.part);
    }
  }

  /// Kernels launched on `st` and not finished now: a coalesced node's kernels end one after
  /// another from its start, as they would apart.
  std::uint64_t kernels_in_flight(const StreamState& st) const {
    if (!st.running || st.kernels < options_.launch_queue_depth) return st.kernels;  // no need to look closer
    const NodeId r = st.queue[st.head];
    const Node& node = g_.nodes[r];
    if (node.run == kNoRun) return st.kernels;
    return st.kernels - detail::run_progress(g_, node, result_.start[r], sim_.now()).ended;
  }

  /// While launches wait on stream `s` and its running node is coalesced, an event at the end of
  /// its next kernel to end (each end makes room for one launch, as apart).
  void watch_parts(std::uint32_t s) {
    StreamState& st = streams_[s];
    if (st.part_event || st.blocked.empty() || !st.running) return;
    const NodeId r = st.queue[st.head];
    const Node& node = g_.nodes[r];
    if (node.run == kNoRun) return;
    const Time next = detail::run_progress(g_, node, result_.start[r], sim_.now()).next_end;
    if (next == Time::max()) return;
    st.part_event = true;
    sim_.schedule_at(next, self_, kPartEnd, s);
  }

  /// When op `n`'s stream holds launch_queue_depth launched, unfinished kernels, queues the
  /// launch of its kernel `part` until one finishes (its host stays busy) and returns true.
  bool hold_launch(NodeId n, std::uint32_t part) {
    const std::uint32_t s = stream_of(n);
    StreamState& st = streams_[s];
    if (options_.launch_queue_depth == 0 || kernels_in_flight(st) < options_.launch_queue_depth) return false;
    st.blocked.push_back({n, part});
    watch_parts(s);
    return true;
  }

  /// Op `n`'s launch returns: it is issued to its stream and its host goes on.
  void launch_returns(NodeId n) {
    hosts_[host_of(n)].busy = false;
    push_issue(n);
    work_.push_back({Work::resume_host, host_of(n)});
  }

  void try_start(std::uint32_t s) {
    StreamState& st = streams_[s];
    if (st.running || st.head >= st.queue.size()) return;
    const NodeId n = st.queue[st.head];
    if (deps_left_[n] > 0) return;
    st.running = true;
    const Node& node = g_.nodes[n];
    mark_ready(n, node);
    if (!is_comm(node.kind)) result_.start[n] = sim_.now();
    switch (node.kind) {
      case OpKind::compute:
        if (node.run != kNoRun) check_run(node);
        schedule_end(n, rates_.start(n, node.rank, node.duration, comm_slowdown(node), sim_.now()));
        if (node.run != kNoRun) watch_parts(s);
        break;
      case OpKind::sync:
        work_.push_back({Work::complete, n});
        break;
      case OpKind::host:  // a CPU worker thread's op (data loading): runs for its duration
        sim_.schedule_after(node.duration, self_, kDone, n);
        break;
      case OpKind::collective:
      case OpKind::send:
      case OpKind::recv:
        arrive_when_sms_free(n, node.rank);
        break;
    }
  }

  /// Compute op `n` ends after `end.after`, unless its end moves first.
  void schedule_end(NodeId n, detail::ComputeRates::End end) {
    sim_.schedule_after(end.after, self_, kDone, (static_cast<std::uint64_t>(end.generation) << 32) | n);
  }

  /// How much compute op `node` slows while its rank communicates: the uniform factor where set,
  /// else its kernel family's.
  double comm_slowdown(const Node& node) const { return comm_slowdown(node.rank, node.signature); }
  double comm_slowdown(RankId rank, std::uint32_t signature) const {
    if (options_.comm_compute_slowdown > 0.0 || signature == kNoSignature) return options_.comm_compute_slowdown;
    const auto& by_type = options_.comm_compute_slowdown_by_rank.empty() ? options_.comm_compute_slowdown_by_type
                                                                         : options_.comm_compute_slowdown_by_rank[rank];
    return by_type[static_cast<std::size_t>(g_.signatures[signature].type)];
  }

  /// A coalesced node runs as its kernels would only where none slows under communication or
  /// holds SMs (ExecutionGraph::add_kernel).
  void check_run(const Node& node) const {
    for (std::uint32_t j = 0; j < g_.kernels(node); ++j) {
      const std::uint32_t sig = g_.part_signature[g_.part(node, j)];
      if (comm_slowdown(node.rank, sig) > 0.0 || holds_sms(node.rank, sig)) {
        throw InternalError(fmt::format("executor: a coalesced node of rank {} holds a kernel that slows under "
                                        "communication or holds SMs",
                                        node.rank));
      }
    }
  }

  /// Whether compute op `node` holds its GPU's SMs until it ends (ExecutorOptions::comm_waits_for).
  bool holds_sms(const Node& node) const { return holds_sms(node.rank, node.signature); }
  bool holds_sms(RankId rank, std::uint32_t signature) const {
    if (signature == kNoSignature) return false;
    const auto& waits = options_.comm_waits_for_by_rank.empty() ? options_.comm_waits_for : options_.comm_waits_for_by_rank[rank];
    return waits[static_cast<std::size_t>(g_.signatures[signature].type)];
  }

  /// Communication op `n` has reached its turn: its kernel is resident and waits for its peers.
  void arrive(NodeId n) {
    if (g_.nodes[n].kind == OpKind::collective) {
      const std::uint32_t c = index_.collective_of(n);
      if (comms_.arrive_collective(c)) start_collective(c);
    } else {
      const std::uint32_t t = index_.transfer_of(n);
      if (comms_.arrive_transfer(t)) start_transfer(t);
    }
  }

  /// Communication op `n` of rank `r` is ready: it arrives now, or, while kernels that hold
  /// every SM run on its GPU, when the last of those ends.
  void arrive_when_sms_free(NodeId n, RankId r) {
    std::vector<NodeId> holding;
    if (waits_) {
      for (const NodeId k : rates_.running(r)) {
        if (holds_sms(g_.nodes[k])) holding.push_back(k);
      }
    }
    if (holding.empty()) {
      arrive(n);
    } else {
      held_[r].push_back({n, std::move(holding)});
    }
  }

  /// Compute op `k` of rank `r` has ended: communication ops waiting for it alone arrive, in the
  /// order they became ready.
  void release_held(NodeId k, RankId r) {
    auto& held = held_[r];
    for (std::size_t i = 0; i < held.size();) {
      auto& w = held[i].waiting_for;
      w.erase(std::remove(w.begin(), w.end(), k), w.end());
      if (!w.empty()) {
        ++i;
        continue;
      }
      const NodeId n = held[i].node;
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
      arrive(n);
    }
  }

  /// The rank starts or stops communicating: its running compute ops change speed.
  void comm_changed(RankId r, int delta) {
    rates_.comm_changed(r, delta, sim_.now(), [&](NodeId n, detail::ComputeRates::End end) { schedule_end(n, end); });
  }

  void start_collective(std::uint32_t c) {
    for (const NodeId m : index_.members(c)) {
      result_.start[m] = sim_.now();
      comm_changed(g_.nodes[m].rank, +1);
    }
    comms_.start_collective(c, FlowNotify{self_, kCollectiveDone, c});
  }

  void start_transfer(std::uint32_t t) {
    const GraphIndex::Transfer& tr = index_.transfers[t];
    const Node& s = g_.nodes[tr.send];
    result_.start[tr.send] = result_.start[tr.recv] = sim_.now();
    comm_changed(s.rank, +1);
    comm_changed(s.peer, +1);
    comms_.start_transfer(t, FlowNotify{self_, kTransferDone, t});
  }

  void complete(NodeId n) {
    if (done_[n] != 0) throw InternalError(fmt::format("executor: node {} completed twice", n));
    done_[n] = 1;
    result_.end[n] = sim_.now();
    const Node& node = g_.nodes[n];
    const Time ran = sim_.now() - result_.start[n];
    if (node.kind == OpKind::compute) {
      rates_.finish(n, node.rank);
      result_.ranks[node.rank].compute += ran;
      if (!held_[node.rank].empty()) release_held(n, node.rank);
    }
    if (is_comm(node.kind)) {
      result_.ranks[node.rank].comm += ran;
      comm_changed(node.rank, -1);
    }
    if (node.stream != kHostStream) {
      const std::uint32_t s = stream_of(n);
      StreamState& st = streams_[s];
      st.running = false;
      if (++st.head >= 4096 && 2 * st.head >= st.queue.size()) {  // keep only the unfinished ops
        st.queue.erase(st.queue.begin(), st.queue.begin() + static_cast<std::ptrdiff_t>(st.head));
        st.head = 0;
      }
      st.kernels -= g_.kernels(node);
      work_.push_back({Work::try_start, s});
      if (!st.blocked.empty()) {  // room for the launch that waited longest
        release(st.blocked.front());
        st.blocked.pop_front();
      }
    }
    for (std::uint32_t k = index_.dependents_offset[n]; k < index_.dependents_offset[n + 1]; ++k) {
      const NodeId d = index_.dependents[k];
      if (--deps_left_[d] != 0) continue;
      const Node& dn = g_.nodes[d];
      if (dn.stream == kHostStream) {
        if (hosts_[host_of(d)].waiting == d) work_.push_back({Work::resume_host, host_of(d)});
      } else if (issued_[d] != 0) {
        work_.push_back({Work::try_start, stream_of(d)});
      }
    }
  }

  const ExecutionGraph& g_;
  const GraphIndex& index_;
  ExecutorOptions options_;
  Simulator sim_;
  HandlerId self_;
  CommJobs jobs_;
  detail::CommStarts comms_;
  detail::ComputeRates rates_;
  /// Per rank, communication ops ready while kernels that hold every SM ran, with the kernels
  /// each still waits for (ExecutorOptions::comm_waits_for).
  struct HeldArrival {
    NodeId node;
    std::vector<NodeId> waiting_for;
  };
  std::vector<std::vector<HeldArrival>> held_;
  bool waits_;
  detail::InterpreterLocks locks_;
  detail::WorkQueue<Work> work_;
  LargeVector<std::uint32_t> deps_left_;
  LargeVector<std::uint8_t> issued_;
  LargeVector<std::uint8_t> done_;
  std::vector<StreamState> streams_;
  std::vector<HostState> hosts_;
  LargeVector<NodeId> programs_;  ///< every host's ops in program order, host after host
  bool sampling_ = false;
  Time sample_interval_;  ///< grows as long runs thin their samples

  /// Halves every link's samples, keeping the latest and every other one before it, and doubles
  /// the interval: the kept samples stay evenly spaced and the next one falls on the new grid.
  void thin_samples() {
    for (auto& samples : result_.link_bytes) {
      const std::size_t keep = (samples.size() - 1) % 2;
      std::size_t out = 0;
      for (std::size_t i = keep; i < samples.size(); i += 2) samples[out++] = samples[i];
      samples.resize(out);
    }
    sample_interval_ = sample_interval_ + sample_interval_;
  }
  ExecutionResult result_;
};

/// Factors must be finite and >= 0 and per-rank settings sized to the graph's ranks.
void check_options(const ExecutionGraph& graph, const ExecutorOptions& options) {
  const auto check = [](double factor, std::string_view what) {
    if (!(factor >= 0.0) || !std::isfinite(factor)) {
      throw ConfigError(fmt::format("{}: expected a factor >= 0, found {}", what, factor));
    }
  };
  check(options.comm_compute_slowdown, "comm_compute_slowdown");
  for (std::size_t t = 0; t < options.comm_compute_slowdown_by_type.size(); ++t) {
    check(options.comm_compute_slowdown_by_type[t],
          fmt::format("comm_compute_slowdown of {} kernels", to_string(static_cast<OpType>(t))));
  }
  const auto sized = [&](std::size_t n, std::string_view what) {
    if (n != 0 && n != graph.ranks()) {
      throw InternalError(fmt::format("executor: {} for {} ranks, but the graph has {}", what, n, graph.ranks()));
    }
  };
  sized(options.comm_compute_slowdown_by_rank.size(), "comm_compute_slowdown_by_rank");
  sized(options.comm_waits_for_by_rank.size(), "comm_waits_for_by_rank");
  for (std::size_t r = 0; r < options.comm_compute_slowdown_by_rank.size(); ++r) {
    for (std::size_t t = 0; t < kOpTypeCount; ++t) {
      check(options.comm_compute_slowdown_by_rank[r][t],
            fmt::format("rank {}'s comm_compute_slowdown of {} kernels", r, to_string(static_cast<OpType>(t))));
    }
  }
}

/// Replays a graph whose options and index are checked.
ExecutionResult run_checked(const ExecutionGraph& graph, GraphIndex index, const Fabric& fabric,
                            const CollectiveConfig& config, NetworkKind network, const ExecutorOptions& options) {
  Runner runner(graph, index, fabric, config, network, options);
  ExecutionResult result = runner.run();
  static_assert(kNoInstance == 0xffffffffu, "GraphIndex::comm_of marks other nodes 0xffffffff");
  result.comm_instance = std::move(index.comm_of);
  return result;
}

}  // namespace

ExecutionResult execute(const ExecutionGraph& graph, const Fabric& fabric, const CollectiveConfig& config,
                        NetworkKind network, const ExecutorOptions& options) {
  check_options(graph, options);
  return run_checked(graph, check_graph(graph, fabric), fabric, config, network, options);
}

ExecutionResult execute(const ExecutionGraph& graph, GraphIndex index, const Fabric& fabric,
                        const CollectiveConfig& config, NetworkKind network, const ExecutorOptions& options) {
  check_options(graph, options);
  return run_checked(graph, std::move(index), fabric, config, network, options);
}

}  // namespace foresight::sim
