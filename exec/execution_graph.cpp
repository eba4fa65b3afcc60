#include "exec/execution_graph.hpp"

#include <fmt/core.h>

#include <algorithm>

#include "common/error.hpp"

namespace foresight::sim {

std::string_view to_string(OpKind k) {
  switch (k) {
    case OpKind::compute:
      return "compute";
    case OpKind::collective:
      return "collective";
    case OpKind::send:
      return "send";
    case OpKind::recv:
      return "recv";
    case OpKind::host:
      return "host";
    case OpKind::sync:
      return "sync";
  }
  return "?";
}

std::string_view to_string(Phase p) {
  switch (p) {
    case Phase::none:
      return "none";
    case Phase::forward:
      return "fwd";
    case Phase::backward:
      return "bwd";
    case Phase::wgrad:
      return "wgrad";
    case Phase::optimizer:
      return "optimizer";
    case Phase::data:
      return "data";
    case Phase::other:
      return "other";
  }
  return "?";
}

RankId ExecutionGraph::add_rank(GpuId gpu, std::uint32_t host) {
  rank_gpu.push_back(gpu);
  rank_host.push_back(host);
  return static_cast<RankId>(rank_gpu.size() - 1);
}

std::uint32_t ExecutionGraph::add_communicator(std::vector<RankId> ranks) {
  communicators.push_back(Communicator{std::move(ranks), {}});
  return static_cast<std::uint32_t>(communicators.size() - 1);
}

std::uint32_t ExecutionGraph::add_communicator(std::vector<RankId> ranks, std::vector<std::vector<GpuId>> groups) {
  communicators.push_back(Communicator{std::move(ranks), std::move(groups)});
  return static_cast<std::uint32_t>(communicators.size() - 1);
}

std::uint32_t ExecutionGraph::intern(std::string_view name) {
  const auto it = name_index.find(name);
  if (it != name_index.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(names.size());
  names.emplace_back(name);
  name_index.emplace(names.back(), id);
  return id;
}

std::uint32_t ExecutionGraph::add_signature(const OpSignature& sig) {
  const std::string k = sig.key() + "@" + std::to_string(sig.batch());
  const auto it = signature_index.find(k);
  if (it != signature_index.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(signatures.size());
  signatures.push_back(sig);
  signature_index.emplace(k, id);
  return id;
}

NodeId ExecutionGraph::append(Node node) {
  if (nodes.size() >= kMaxNodes) {
    throw ConfigError(fmt::format(
        "the execution graph passed {} M nodes (about {:.0f} GB with its results), the most one "
        "simulation may hold: simulate fewer steps or micro-batches (a smaller global batch or a larger "
        "micro-batch)",
        kMaxNodes / 1'000'000, kMaxNodes * 140.0 / 1e9));
  }
  nodes.push_back(std::move(node));
  return static_cast<NodeId>(nodes.size() - 1);
}

void ExecutionGraph::start_coalescing() {
  if (!nodes.empty()) throw InternalError("ExecutionGraph: coalescing starts before the first node");
  coalescing_ = true;
  exact_ = true;
  tail_open_ = false;
  next_id_ = 0;
  first_id_.clear();
}

std::pair<NodeId, bool> ExecutionGraph::locate(NodeId id) const {
  if (id >= next_id_) throw InternalError(fmt::format("ExecutionGraph: id {} is not yet added", id));
  // Ids grow with the nodes: the node holding `id` is the last whose first id is <= it. Most
  // lookups name one of the last nodes, so the search gallops back from the end (1, 2, 4, ...
  // nodes) and bisects only the bracket found: a few probes near the end of the array.
  NodeId n = static_cast<NodeId>(first_id_.size() - 1);
  if (first_id_[n] > id) {
    std::size_t hi = n;  // first_id_[hi] > id
    std::size_t lo = 0;  // first_id_[lo] <= id once found (first_id_[0] is 0)
    for (std::size_t step = 1; step <= hi; step *= 2) {
      if (first_id_[hi - step] <= id) {
        lo = hi - step;
        break;
      }
      hi -= step;
    }
    n = static_cast<NodeId>(std::upper_bound(first_id_.begin() + static_cast<std::ptrdiff_t>(lo),
                                             first_id_.begin() + static_cast<std::ptrdiff_t>(hi), id) -
                            first_id_.begin() - 1);
  }
  const NodeId next = n + 1 < first_id_.size() ? first_id_[n + 1] : next_id_;
  return {n, id + 1 == next};
}

NodeId ExecutionGraph::node_of(NodeId id, bool last) {
  if (!coalescing_) return id;
  const auto [n, is_last] = locate(id);
  const bool is_first = first_id_[n] == id;
  if (last ? !is_last : !is_first) exact_ = false;
  return n;
}

NodeId ExecutionGraph::add(Node node) {
  if (!coalescing_) return append(std::move(node));
  // A dependency waits for the end of the kernel it names: the end of its node only if that
  // kernel is the node's last.
  for (NodeId& d : node.deps) d = node_of(d, true);
  close_tail();
  first_id_.push_back(next_id_);
  append(std::move(node));
  return next_id_++;
}

NodeId ExecutionGraph::add_kernel(Node node) {
  if (!coalescing_) return append(std::move(node));
  if (node.kind != OpKind::compute || node.stream == kHostStream || node.run != kNoRun) {
    throw InternalError("ExecutionGraph::add_kernel: expected a GPU compute kernel");
  }
  const NodeId prev_id = next_id_ - 1;  // the tail's last kernel, when the tail is open
  bool joins = tail_open_ && node.gil <= Time::zero();
  if (joins) {
    const Node& t = nodes[nodes.size() - 1];
    const Time last = t.run == kNoRun ? t.duration : part_duration[part(t, runs[t.run].count - 1)];
    joins = t.rank == node.rank && t.stream == node.stream &&
            t.micro_batch == node.micro_batch && last >= node.dispatch &&
            std::all_of(node.deps.begin(), node.deps.end(), [&](NodeId d) { return d == prev_id; });
  }
  if (!joins) {
    const NodeId id = add(std::move(node));
    tail_open_ = nodes[nodes.size() - 1].gil <= Time::zero();
    return id;
  }
  Node& t = nodes[nodes.size() - 1];
  if (t.run == kNoRun) {  // the tail becomes a run of its own kernel and this one
    t.run = static_cast<std::uint32_t>(runs.size());
    runs.push_back(KernelRun{static_cast<std::uint32_t>(part_duration.size()), 1});
    part_duration.push_back(t.duration);
    part_dispatch.push_back(t.dispatch);
    part_signature.push_back(t.signature);
  }
  ++runs[t.run].count;
  part_duration.push_back(node.duration);
  part_dispatch.push_back(node.dispatch);
  part_signature.push_back(node.signature);
  t.duration += node.duration;
  return next_id_++;
}

void ExecutionGraph::close_tail() {
  const bool open_run = tail_open_ && nodes[nodes.size() - 1].run != kNoRun;
  tail_open_ = false;
  if (!open_run) return;
  // The run is complete: its parts are the last in the part arrays. Where an earlier run holds
  // the same kernels (a layer's forward repeats for every micro-batch), the node takes that run
  // and the new one is dropped.
  const auto r = static_cast<std::uint32_t>(runs.size() - 1);
  const KernelRun run = runs[r];
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ run.count;
  const auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 0x100000001b3ull + (h >> 29); };
  for (std::uint32_t j = run.first; j < run.first + run.count; ++j) {
    mix(static_cast<std::uint64_t>(part_duration[j].ps()));
    mix(static_cast<std::uint64_t>(part_dispatch[j].ps()));
    mix(part_signature[j]);
  }
  bool inserted = false;
  const std::uint32_t earlier = run_by_hash_.get_or_make(h, [&] {
    inserted = true;
    return r;
  });
  if (inserted) return;
  const KernelRun same = runs[earlier];
  const auto equal = [&](std::uint32_t j) {
    return part_duration[same.first + j] == part_duration[run.first + j] &&
           part_dispatch[same.first + j] == part_dispatch[run.first + j] &&
           part_signature[same.first + j] == part_signature[run.first + j];
  };
  std::uint32_t j = 0;
  if (same.count == run.count) {
    while (j < run.count && equal(j)) ++j;
  }
  if (j != run.count) return;  // a different run with the same hash keeps its own parts
  nodes[nodes.size() - 1].run = earlier;
  runs.pop_back();
  part_duration.resize(run.first);
  part_dispatch.resize(run.first);
  part_signature.resize(run.first);
}

void ExecutionGraph::finish_coalescing() {
  close_tail();
  coalescing_ = false;
  first_id_ = {};
  run_by_hash_ = {};
}

}  // namespace foresight::sim
