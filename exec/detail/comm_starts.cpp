#include "exec/detail/comm_starts.hpp"

#include <fmt/core.h>

#include "collectives/collective_plan.hpp"
#include "common/error.hpp"

namespace foresight::sim::detail {

CommStarts::CommStarts(const ExecutionGraph& g, const GraphIndex& index, const Fabric& fabric,
                       const CollectiveConfig& config, Simulator& sim, CommJobs& jobs)
    : g_(g),
      index_(index),
      fabric_(fabric),
      config_(config),
      sim_(sim),
      jobs_(jobs),
      coll_arrived_(index.collective_count(), 0),
      p2p_arrived_(index.transfers.size(), 0) {}

std::uint32_t CommStarts::job_id(const JobKey& key) {
  return job_ids_.get_or_make(key, [&] { return static_cast<std::uint32_t>(job_ids_.size()); });
}

void CommStarts::start_collective(std::uint32_t c, FlowNotify done) {
  const Node& first = g_.nodes[index_.members(c).front()];
  if (first.duration > Time::zero()) {  // measured (trace replay): the network is not consulted
    sim_.schedule_after(first.duration, done.target, done.kind, done.data);
    return;
  }
  const JobKey key{true, first.communicator, first.matrix, static_cast<int>(first.op), first.bytes, first.root,
                   first.algorithm ? static_cast<int>(*first.algorithm) : -1};
  // Folded: every group it stands for runs it now.
  jobs_.start(job_id(key), [&] {
    CollectiveRequest r;
    r.op = first.op;
    r.bytes = first.bytes;
    r.root = first.root;
    r.algorithm = first.algorithm;
    if (first.matrix != kNoMatrix) r.send_matrix = g_.send_matrices[first.matrix];
    const Communicator& comm = g_.communicators[first.communicator];
    std::vector<CollectivePlan> plans;
    if (comm.groups.empty()) {
      for (const RankId rank : comm.ranks) r.ranks.push_back(g_.rank_gpu[rank]);
      plans.push_back(plan_collective(fabric_, config_, r, &shapes_));
    }
    for (const auto& group : comm.groups) {
      r.ranks = group;
      plans.push_back(plan_collective(fabric_, config_, r, &shapes_));
    }
    return plans;
  }, done);
}

void CommStarts::start_transfer(std::uint32_t t, FlowNotify done) {
  const Node& s = g_.nodes[index_.transfers[t].send];
  const GpuId src = g_.rank_gpu[s.rank];
  const GpuId dst = g_.rank_gpu[s.peer];
  if (src == dst) {  // both ranks on one GPU: a local copy, taken as free
    sim_.schedule_at(sim_.now(), done.target, done.kind, done.data);
    return;
  }
  jobs_.start(job_id(JobKey{false, s.rank, s.peer, 0, s.bytes, 0, 0}), [&] {
    CollectiveRequest r;
    r.op = CollectiveOp::send_recv;
    r.bytes = s.bytes;
    r.ranks = {src, dst};
    std::vector<CollectivePlan> plans{plan_collective(fabric_, config_, r)};
    const std::size_t mirrors = g_.represents(s.rank) - 1;
    for (std::size_t k = 0; k < mirrors; ++k) {  // folded: the mirrors' copies of it
      r.ranks = {g_.rank_mirrors[s.rank][k], g_.rank_mirrors[s.peer][k]};
      plans.push_back(plan_collective(fabric_, config_, r));
    }
    return plans;
  }, done);
}

void report_deadlock(const ExecutionGraph& g, const GraphIndex& index, const CommStarts& comms,
                     const LargeVector<std::uint8_t>& done, const LargeVector<std::uint8_t>& issued,
                     const LargeVector<std::uint32_t>& deps_left) {
  std::string waiting;
  int shown = 0;
  std::size_t left = 0;
  for (NodeId n = 0; n < g.nodes.size(); ++n) {
    if (done[n] != 0) continue;
    ++left;
    if (shown == 5) continue;
    ++shown;
    const Node& node = g.nodes[n];
    std::string why;
    if (node.kind == OpKind::collective && issued[n] != 0) {
      const auto c = index.collective_of(n);
      why = fmt::format("{} of {} members arrived", comms.arrived(c), index.members(c).size());
    } else if ((node.kind == OpKind::send || node.kind == OpKind::recv) && issued[n] != 0) {
      why = "its partner never became ready";
    } else if (deps_left[n] > 0) {
      why = fmt::format("{} dependencies unfinished", deps_left[n]);
    } else {
      why = "never reached by its host or stream";
    }
    waiting += fmt::format("\n  node {} (rank {}, {} {}): {}", n, node.rank, to_string(node.kind), g.names[node.name],
                           why);
  }
  if (left > 0) {
    throw GraphError(fmt::format("deadlock: {} of {} operations never finished; the first:{}", left, g.nodes.size(),
                                 waiting));
  }
}

}  // namespace foresight::sim::detail
