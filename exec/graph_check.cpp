#include "exec/graph_check.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "common/error.hpp"

namespace foresight::sim {
namespace {

std::string describe(const ExecutionGraph& g, NodeId n) {
  const Node& node = g.nodes[n];
  const std::string& name = g.names.at(node.name);
  return fmt::format("node {} (rank {}, {}{}{})", n, node.rank, to_string(node.kind), name.empty() ? "" : " ", name);
}

[[noreturn]] void fail(const ExecutionGraph& g, NodeId n, const std::string& what) {
  throw GraphError(fmt::format("execution graph: {}: {}", describe(g, n), what));
}

bool is_gpu_op(OpKind k) { return k == OpKind::compute || k == OpKind::collective || k == OpKind::send || k == OpKind::recv; }

/// Per run, its kernels' total duration once checked: nodes share runs
/// (ExecutionGraph::close_tail), and each is checked once.
using CheckedRuns = std::vector<std::optional<Time>>;

/// A coalesced node (ExecutionGraph::add_kernel): a GPU kernel standing for two or more, whose
/// durations add up to its own and whose first dispatch is its own; each kernel after the first
/// is launched before the one before it ends, and no kernel takes an interpreter lock.
void check_run(const ExecutionGraph& g, NodeId i, CheckedRuns& checked) {
  const Node& n = g.nodes[i];
  if (n.kind != OpKind::compute || n.stream == kHostStream || n.gil > Time::zero()) {
    fail(g, i, "only a GPU kernel without an interpreter lock may stand for a run of kernels");
  }
  if (n.run >= g.runs.size()) fail(g, i, fmt::format("run {} does not exist ({} runs)", n.run, g.runs.size()));
  const KernelRun& r = g.runs[n.run];
  if (checked[n.run]) {
    if (*checked[n.run] != n.duration || g.part_dispatch[r.first] != n.dispatch) {
      fail(g, i, "its duration is not its kernels' sum, or its dispatch not its first kernel's");
    }
    return;
  }
  const std::size_t parts = g.part_duration.size();
  if (r.count < 2 || r.first > parts || parts - r.first < r.count || g.part_dispatch.size() != parts ||
      g.part_signature.size() != parts) {
    fail(g, i, fmt::format("run {} ({} kernels from {}) does not fit the {} kernels stored", n.run, r.count, r.first, parts));
  }
  Time total;
  for (std::uint32_t j = 0; j < r.count; ++j) {
    const Time d = g.part_duration[r.first + j];
    const Time launch = g.part_dispatch[r.first + j];
    const std::uint32_t sig = g.part_signature[r.first + j];
    if (d < Time::zero() || launch < Time::zero()) fail(g, i, fmt::format("kernel {} of its run: negative duration or dispatch", j));
    if (sig != kNoSignature && sig >= g.signatures.size()) fail(g, i, fmt::format("kernel {} of its run: no signature {}", j, sig));
    if (j > 0 && launch > g.part_duration[r.first + j - 1]) {
      fail(g, i, fmt::format("kernel {} of its run is dispatched for longer than kernel {} runs", j, j - 1));
    }
    total += d;
  }
  if (total != n.duration || g.part_dispatch[r.first] != n.dispatch) {
    fail(g, i, "its duration is not its kernels' sum, or its dispatch not its first kernel's");
  }
  checked[n.run] = total;
}

void check_node(const ExecutionGraph& g, NodeId i, CheckedRuns& checked) {
  const Node& n = g.nodes[i];
  if (n.rank >= g.ranks()) fail(g, i, fmt::format("rank {} does not exist ({} ranks)", n.rank, g.ranks()));
  if (n.name >= g.names.size()) fail(g, i, fmt::format("label {} is not among the {} names", n.name, g.names.size()));
  if (n.kind == OpKind::compute && n.signature != kNoSignature && n.signature >= g.signatures.size()) {
    fail(g, i, fmt::format("signature {} is not among the graph's {} kernels", n.signature, g.signatures.size()));
  }
  if (is_gpu_op(n.kind) && n.stream == kHostStream) fail(g, i, "a GPU op cannot be on the host stream (0)");
  if (n.duration < Time::zero() || n.dispatch < Time::zero()) fail(g, i, "negative duration or dispatch cost");
  if (n.run != kNoRun) check_run(g, i, checked);
  if ((n.kind == OpKind::collective || n.kind == OpKind::send || n.kind == OpKind::recv) &&
      (!(n.bytes >= 0.0) || !std::isfinite(n.bytes))) {
    fail(g, i, fmt::format("expected a non-negative byte count, found {}", n.bytes));
  }
  for (const NodeId d : n.deps) {
    if (d >= i) fail(g, i, fmt::format("depends on node {}, which does not come before it", d));
    const RankId dr = g.nodes[d].rank;
    if (dr == n.rank) continue;
    // Threads of one process may wait on each other (queues, joins); other ranks only communicate.
    const bool same_process = !g.host_process.empty() && dr < g.ranks() && n.rank < g.ranks() &&
                              g.rank_host[dr] < g.host_process.size() && g.rank_host[n.rank] < g.host_process.size() &&
                              g.host_process[g.rank_host[dr]] == g.host_process[g.rank_host[n.rank]];
    if (!same_process) {
      fail(g, i, fmt::format("depends on node {} of rank {}: ranks order each other only by communication "
                             "(threads of one process also by waits)", d, dr));
    }
  }
  if (n.kind == OpKind::collective) {
    if (n.communicator >= g.communicators.size()) {
      fail(g, i, fmt::format("communicator {} does not exist ({} defined)", n.communicator, g.communicators.size()));
    }
    const auto& members = g.communicators[n.communicator].ranks;
    if (std::find(members.begin(), members.end(), n.rank) == members.end()) {
      fail(g, i, fmt::format("rank {} is not a member of communicator {}", n.rank, n.communicator));
    }
    const auto& groups = g.communicators[n.communicator].groups;
    const std::size_t size = groups.empty() ? members.size() : groups.front().size();
    if ((n.op == CollectiveOp::broadcast || n.op == CollectiveOp::reduce) &&
        (n.root < 0 || static_cast<std::size_t>(n.root) >= size)) {
      fail(g, i, fmt::format("root {} is outside communicator {} of {} ranks", n.root, n.communicator, size));
    }
    if (n.op == CollectiveOp::send_recv) fail(g, i, "send_recv is expressed as a send node and a recv node");
    if (n.matrix != kNoMatrix) {
      if (n.op != CollectiveOp::all_to_all) fail(g, i, "only an all_to_all takes a send matrix");
      if (n.matrix >= g.send_matrices.size()) {
        fail(g, i, fmt::format("send matrix {} does not exist ({} defined)", n.matrix, g.send_matrices.size()));
      }
      if (g.send_matrices[n.matrix].size() != size * size) {
        fail(g, i, fmt::format("send matrix {} has {} entries, expected {} x {} for communicator {}", n.matrix,
                               g.send_matrices[n.matrix].size(), size, size, n.communicator));
      }
    }
  }
  if ((n.kind == OpKind::send || n.kind == OpKind::recv) && (n.peer >= g.ranks() || n.peer == n.rank)) {
    fail(g, i, fmt::format("peer {} is not another rank", n.peer));
  }
}

/// A folded graph's groups and mirrors name real GPUs, consistently.
void check_folding(const ExecutionGraph& g, const Fabric& fabric) {
  const auto check_gpu = [&](GpuId gpu, const std::string& where) {
    if (gpu >= fabric.gpu_count()) {
      throw GraphError(fmt::format("execution graph: {} names GPU {}, but the cluster has {} GPUs", where, gpu,
                                   fabric.gpu_count()));
    }
  };
  for (std::size_t c = 0; c < g.communicators.size(); ++c) {
    const Communicator& comm = g.communicators[c];
    if (comm.groups.empty()) continue;
    const std::size_t size = comm.groups.front().size();
    if (size < comm.ranks.size()) {
      throw GraphError(fmt::format("execution graph: communicator {} has {} simulated members but groups of {} GPUs", c,
                                   comm.ranks.size(), size));
    }
    for (std::size_t k = 0; k < comm.groups.size(); ++k) {
      if (comm.groups[k].size() != size) {
        throw GraphError(fmt::format("execution graph: communicator {}: group {} has {} GPUs, group 0 has {}", c, k,
                                     comm.groups[k].size(), size));
      }
      for (const GpuId gpu : comm.groups[k]) check_gpu(gpu, fmt::format("communicator {} group {}", c, k));
    }
    for (const RankId r : comm.ranks) {
      const auto& first = comm.groups.front();
      if (r < g.ranks() && std::find(first.begin(), first.end(), g.rank_gpu[r]) == first.end()) {
        throw GraphError(fmt::format("execution graph: communicator {}: member rank {} runs on GPU {}, which is not in "
                                     "its first group", c, r, g.rank_gpu[r]));
      }
    }
  }
  if (!g.rank_mirrors.empty() && g.rank_mirrors.size() != g.ranks()) {
    throw GraphError(fmt::format("execution graph: {} ranks but mirrors for {}", g.ranks(), g.rank_mirrors.size()));
  }
  for (std::size_t r = 0; r < g.rank_mirrors.size(); ++r) {
    for (const GpuId gpu : g.rank_mirrors[r]) check_gpu(gpu, fmt::format("rank {}'s mirrors", r));
  }
}

}  // namespace

GraphIndex check_graph(const ExecutionGraph& g, const Fabric& fabric) {
  if (g.rank_host.size() != g.ranks()) {
    throw GraphError(fmt::format("execution graph: {} ranks but {} host assignments", g.ranks(), g.rank_host.size()));
  }
  for (RankId r = 0; r < g.ranks(); ++r) {
    if (g.rank_gpu[r] >= fabric.gpu_count()) {
      throw GraphError(fmt::format("execution graph: rank {} runs on GPU {}, but the cluster has {} GPUs", r,
                                   g.rank_gpu[r], fabric.gpu_count()));
    }
  }
  for (std::size_t c = 0; c < g.communicators.size(); ++c) {
    const auto& ranks = g.communicators[c].ranks;
    if (ranks.empty()) throw GraphError(fmt::format("execution graph: communicator {} is empty", c));
    std::vector<RankId> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t k = 0; k < sorted.size(); ++k) {
      if (sorted[k] >= g.ranks() || (k > 0 && sorted[k] == sorted[k - 1])) {
        throw GraphError(fmt::format("execution graph: communicator {} names rank {} {}", c, sorted[k],
                                     sorted[k] >= g.ranks() ? "which does not exist" : "twice"));
      }
    }
  }
  check_folding(g, fabric);
  GraphIndex x;
  const std::size_t n = g.nodes.size();
  x.rank_streams.resize(g.ranks());
  x.comm_of.assign(n, 0xffffffffu);
  for (const std::uint32_t h : g.rank_host) x.host_count = std::max(x.host_count, h + 1);
  if (!g.host_process.empty() && g.host_process.size() < x.host_count) {
    throw GraphError(fmt::format("execution graph: host_process names {} host threads, but ranks use {}",
                                 g.host_process.size(), x.host_count));
  }
  // GPU streams are numbered in the order their (rank, stream) first appears.
  LargeVector<std::uint32_t> dependents_count(n, 0);
  // Collectives: per (communicator, rank), the k-th collective of that rank there.
  std::unordered_map<std::uint64_t, std::vector<NodeId>> by_comm_rank;
  const auto comm_rank = [](std::uint32_t c, RankId r) { return (std::uint64_t{c} << 32) | r; };
  std::map<std::tuple<RankId, RankId, std::uint32_t>, std::vector<NodeId>> sends;
  std::map<std::tuple<RankId, RankId, std::uint32_t>, std::vector<NodeId>> recvs;
  CheckedRuns checked(g.runs.size());
  for (NodeId i = 0; i < n; ++i) {
    check_node(g, i, checked);
    const Node& node = g.nodes[i];
    if (node.stream != kHostStream && x.stream_index(node.rank, node.stream) == 0xffffffffu) {
      x.rank_streams[node.rank].emplace_back(node.stream, x.stream_count++);
    }
    for (const NodeId d : node.deps) ++dependents_count[d];
    if (node.kind == OpKind::collective) by_comm_rank[comm_rank(node.communicator, node.rank)].push_back(i);
    if (node.kind == OpKind::send) sends[{node.rank, node.peer, node.tag}].push_back(i);
    if (node.kind == OpKind::recv) recvs[{node.peer, node.rank, node.tag}].push_back(i);
  }
  x.dependents_offset.assign(n + 1, 0);
  for (NodeId i = 0; i < n; ++i) x.dependents_offset[i + 1] = x.dependents_offset[i] + dependents_count[i];
  x.dependents.resize(x.dependents_offset[n]);
  LargeVector<std::uint32_t> fill(x.dependents_offset.begin(), x.dependents_offset.end() - 1);
  for (NodeId i = 0; i < n; ++i) {
    for (const NodeId d : g.nodes[i].deps) x.dependents[fill[d]++] = i;
  }

  for (std::uint32_t c = 0; c < g.communicators.size(); ++c) {
    const auto& members = g.communicators[c].ranks;
    // Each member's list of collectives here, found once.
    std::vector<const std::vector<NodeId>*> lists;
    for (const RankId r : members) {
      const auto it = by_comm_rank.find(comm_rank(c, r));
      lists.push_back(it == by_comm_rank.end() ? nullptr : &it->second);
    }
    const auto count_of = [&](std::size_t m) { return lists[m] == nullptr ? std::size_t{0} : lists[m]->size(); };
    const std::size_t k_max = count_of(0);
    for (std::size_t m = 0; m < members.size(); ++m) {
      const RankId r = members[m];
      if (count_of(m) != k_max) {
        throw GraphError(fmt::format("execution graph: on communicator {}, rank {} calls {} collectives but rank {} "
                                     "calls {}: every member must call the same ones",
                                     c, members.front(), k_max, r, count_of(m)));
      }
    }
    for (std::size_t k = 0; k < k_max; ++k) {
      const std::uint32_t id = x.collective_count();
      for (const std::vector<NodeId>* list : lists) x.collective_members.push_back((*list)[k]);
      x.collective_offset.push_back(static_cast<std::uint32_t>(x.collective_members.size()));
      const std::span<const NodeId> members = x.members(id);
      const Node& a = g.nodes[members.front()];
      for (const NodeId m : members) {
        const Node& b = g.nodes[m];
        if (b.op != a.op || b.bytes != a.bytes || b.root != a.root || b.algorithm != a.algorithm || b.matrix != a.matrix ||
            b.duration != a.duration) {
          throw GraphError(fmt::format("execution graph: collective #{} on communicator {}: {} is {} of {} bytes but {} "
                                       "is {} of {} bytes (or their root, algorithm, matrix or measured time differ)",
                                       k, c, describe(g, members.front()), to_string(a.op), a.bytes, describe(g, m),
                                       to_string(b.op), b.bytes));
        }
        x.comm_of[m] = id;
      }
    }
  }
  for (const auto& [key, list] : sends) {
    const auto it = recvs.find(key);
    const std::size_t r = it == recvs.end() ? 0 : it->second.size();
    if (r != list.size()) {
      throw GraphError(fmt::format("execution graph: rank {} sends {} message(s) with tag {} to rank {}, which receives {}",
                                   std::get<0>(key), list.size(), std::get<2>(key), std::get<1>(key), r));
    }
    for (std::size_t k = 0; k < list.size(); ++k) {
      const NodeId s = list[k];
      const NodeId v = it->second[k];
      if (g.nodes[s].bytes != g.nodes[v].bytes) {
        throw GraphError(fmt::format("execution graph: {} sends {} bytes but {} receives {}", describe(g, s),
                                     g.nodes[s].bytes, describe(g, v), g.nodes[v].bytes));
      }
      if (g.represents(g.nodes[s].rank) != g.represents(g.nodes[v].rank)) {
        throw GraphError(fmt::format("execution graph: {} stands for {} GPUs but its receiver {} for {}: a folded "
                                     "transfer needs as many mirrors on both sides",
                                     describe(g, s), g.represents(g.nodes[s].rank), describe(g, v),
                                     g.represents(g.nodes[v].rank)));
      }
      x.comm_of[s] = x.comm_of[v] = static_cast<std::uint32_t>(x.collective_count() + x.transfers.size());
      x.transfers.push_back({s, v});
    }
  }
  for (const auto& [key, list] : recvs) {
    if (sends.find(key) == sends.end()) {
      throw GraphError(fmt::format("execution graph: rank {} receives {} message(s) with tag {} from rank {}, which sends none",
                                   std::get<1>(key), list.size(), std::get<2>(key), std::get<0>(key)));
    }
  }
  return x;
}

}  // namespace foresight::sim
