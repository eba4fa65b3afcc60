#include "exec/path_bound.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "common/error.hpp"
#include "common/large_vector.hpp"
#include "exec/detail/kernel_runs.hpp"

namespace foresight::sim {
namespace {

constexpr std::int64_t kUnknown = std::numeric_limits<std::int64_t>::min();
constexpr NodeId kNone = 0xffffffffu;

std::int64_t after(std::int64_t t, Time d) { return t == kUnknown ? kUnknown : t + d.ps(); }

/// The time to move `bytes` at `rate`, rounded down to a picosecond (zero when nothing moves or
/// no rate is known: no bound).
Time at_rate(double bytes, Bandwidth rate) {
  if (!(bytes > 0.0) || !(rate.bytes_per_second() > 0.0)) return Time::zero();
  const double ps = std::floor(bytes / rate.bytes_per_second() * 1e12);
  return std::isfinite(ps) && ps < 9e18 ? Time::from_ps(static_cast<std::int64_t>(ps)) : Time::zero();
}

Bandwidth rate_of(const std::vector<Bandwidth>& rates, GpuId gpu) { return gpu < rates.size() ? rates[gpu] : Bandwidth{}; }

/// What does not change from one (from, to) pair to the next: each op's successor in its host's
/// program and in its stream, the orders each op waits for, and the communication ops' bounds.
struct Orders {
  LargeVector<NodeId> host_next;
  LargeVector<NodeId> stream_next;
  LargeVector<std::uint32_t> need;  ///< dependencies + stream predecessor + host predecessor (or start)
  std::vector<NodeId> host_first;
  std::vector<std::uint32_t> members;  ///< per communication instance
  std::vector<Time> lasts;             ///< per communication instance, at least
};

Orders orders_of(const ExecutionGraph& g, const GraphIndex& index, const GpuLineRates& rates) {
  const std::size_t n = g.nodes.size();
  Orders o;
  o.host_next.assign(n, kNone);
  o.stream_next.assign(n, kNone);
  o.need.resize(n);
  o.host_first.assign(index.host_count, kNone);
  std::vector<NodeId> host_last(index.host_count, kNone);
  std::vector<NodeId> stream_last(index.stream_count, kNone);
  for (NodeId i = 0; i < n; ++i) {
    const Node& node = g.nodes[i];
    o.need[i] = static_cast<std::uint32_t>(node.deps.size()) + 1;  // + the host reaching it
    const std::uint32_t h = g.rank_host[node.rank];
    if (host_last[h] == kNone) {
      o.host_first[h] = i;
    } else {
      o.host_next[host_last[h]] = i;
    }
    host_last[h] = i;
    if (node.stream == kHostStream) continue;
    const std::uint32_t s = index.stream_index(node.rank, node.stream);
    if (stream_last[s] != kNone) {
      o.stream_next[stream_last[s]] = i;
      ++o.need[i];
    }
    stream_last[s] = i;
  }
  const std::uint32_t collectives = index.collective_count();
  const std::size_t instances = collectives + index.transfers.size();
  o.members.resize(instances);
  o.lasts.resize(instances);
  // A collective's bound follows from its communicator, op, bytes, root and send matrix: the
  // instances a pipeline repeats for every micro-batch are bounded once.
  std::map<std::tuple<std::uint32_t, int, std::uint64_t, int, std::uint32_t>, Time> known;
  for (std::uint32_t c = 0; c < instances; ++c) {
    o.members[c] = c < collectives ? static_cast<std::uint32_t>(index.members(c).size()) : 2;
    if (c >= collectives || g.nodes[index.members(c).front()].duration > Time::zero()) {  // a transfer, or measured
      o.lasts[c] = comm_lower_bound(g, index, rates, c);
      continue;
    }
    const Node& n = g.nodes[index.members(c).front()];
    const auto [it, added] = known.try_emplace(
        {n.communicator, static_cast<int>(n.op), std::bit_cast<std::uint64_t>(n.bytes), n.root, n.matrix}, Time{});
    if (added) it->second = comm_lower_bound(g, index, rates, c);
    o.lasts[c] = it->second;
  }
  return o;
}


/// The bytes each member GPU must send or receive over its own links (see the header).
Time gpu_bound(const ExecutionGraph& g, const Node& n, const std::vector<GpuId>& gpus, const GpuLineRates& rates) {
  const std::size_t k = gpus.size();
  Bandwidth out = rate_of(rates.egress, gpus.front());
  Bandwidth in = rate_of(rates.ingress, gpus.front());
  Bandwidth out_but_root = Bandwidth::bytes_per_second(std::numeric_limits<double>::infinity());
  Bandwidth in_but_root = out_but_root;
  for (std::size_t i = 0; i < k; ++i) {
    const Bandwidth e = rate_of(rates.egress, gpus[i]);
    const Bandwidth f = rate_of(rates.ingress, gpus[i]);
    out = std::min(out, e);
    in = std::min(in, f);
    if (static_cast<int>(i) != n.root) {
      out_but_root = std::min(out_but_root, e);
      in_but_root = std::min(in_but_root, f);
    }
  }
  const double share = n.bytes * static_cast<double>(k - 1) / static_cast<double>(k);
  switch (n.op) {
    case CollectiveOp::all_reduce:  // every GPU sends its part of the others' shards and learns theirs
      return at_rate(share, std::min(out, in));
    case CollectiveOp::reduce_scatter:  // in-switch reduction receives only the GPU's own shard
      return at_rate(share, out);
    case CollectiveOp::all_gather:  // multicast sends the GPU's shard once
      return at_rate(share, in);
    case CollectiveOp::broadcast:
      return at_rate(n.bytes, in_but_root);
    case CollectiveOp::reduce:
      return at_rate(n.bytes, out_but_root);
    case CollectiveOp::all_to_all: {
      if (n.matrix == kNoMatrix) return at_rate(share, std::min(out, in));
      const std::vector<double>& m = g.send_matrices.at(n.matrix);
      if (m.size() != k * k) return Time::zero();
      Time most;
      for (std::size_t i = 0; i < k; ++i) {
        double row = 0.0, column = 0.0;
        for (std::size_t j = 0; j < k; ++j) {
          if (j == i) continue;
          row += m[i * k + j];
          column += m[j * k + i];
        }
        most = std::max({most, at_rate(row, rate_of(rates.egress, gpus[i])), at_rate(column, rate_of(rates.ingress, gpus[i]))});
      }
      return most;
    }
    case CollectiveOp::send_recv:
      return Time::zero();
  }
  return Time::zero();
}

/// The cut around each server holding members of a group spread over several (see the header).
Time server_bound(const ExecutionGraph& g, const Node& n, const std::vector<GpuId>& gpus, const GpuLineRates& rates) {
  const std::size_t k = gpus.size();
  struct Side {
    int node;
    double members = 0.0;
    double out = 0.0;  ///< all_to_allv: bytes from its members to the others
    double in = 0.0;
    bool root = false;
  };
  std::vector<Side> sides;
  std::vector<std::size_t> side_of(k);
  for (std::size_t i = 0; i < k; ++i) {
    const int node = gpus[i] < rates.node.size() ? rates.node[gpus[i]] : -1;
    if (node < 0 || static_cast<std::size_t>(node) >= rates.node_egress.size()) return Time::zero();
    auto it = std::find_if(sides.begin(), sides.end(), [&](const Side& s) { return s.node == node; });
    if (it == sides.end()) it = sides.insert(sides.end(), Side{node});
    it->members += 1.0;
    it->root = it->root || static_cast<int>(i) == n.root;
    side_of[i] = static_cast<std::size_t>(it - sides.begin());
  }
  if (sides.size() < 2) return Time::zero();
  const bool matrix = n.op == CollectiveOp::all_to_all && n.matrix != kNoMatrix;
  if (matrix) {
    const std::vector<double>& m = g.send_matrices.at(n.matrix);
    if (m.size() != k * k) return Time::zero();
    for (std::size_t i = 0; i < k; ++i) {
      for (std::size_t j = 0; j < k; ++j) {
        if (side_of[i] == side_of[j]) continue;
        sides[side_of[i]].out += m[i * k + j];
        sides[side_of[j]].in += m[i * k + j];
      }
    }
  }
  const double kk = static_cast<double>(k);
  const double s = n.bytes;
  Time most;
  for (const Side& side : sides) {
    const double mine = side.members / kk;  // the server's share of the shards
    double out = 0.0, in = 0.0;
    switch (n.op) {
      case CollectiveOp::all_reduce:
        out = in = s;
        break;
      case CollectiveOp::reduce_scatter:  // the others' shards leave summed; its own come in summed
        out = (1.0 - mine) * s;
        in = mine * s;
        break;
      case CollectiveOp::all_gather:
        out = mine * s;
        in = (1.0 - mine) * s;
        break;
      case CollectiveOp::broadcast:
        (side.root ? out : in) = s;
        break;
      case CollectiveOp::reduce:
        (side.root ? in : out) = s;
        break;
      case CollectiveOp::all_to_all:
        if (matrix) {
          out = side.out;
          in = side.in;
        } else {
          out = in = side.members * (kk - side.members) / kk * s;  // S / k from each to each
        }
        break;
      case CollectiveOp::send_recv:
        break;
    }
    const auto node = static_cast<std::size_t>(side.node);
    most = std::max({most, at_rate(out, rates.node_egress[node]), at_rate(in, rates.node_ingress[node])});
  }
  return most;
}

}  // namespace

Time comm_lower_bound(const ExecutionGraph& g, const GraphIndex& index, const GpuLineRates& rates,
                      std::uint32_t instance) {
  const std::uint32_t collectives = index.collective_count();
  if (instance >= collectives) {
    const GraphIndex::Transfer& t = index.transfers.at(instance - collectives);
    const Node& s = g.nodes[t.send];
    const GpuId a = g.rank_gpu[s.rank];
    const GpuId b = g.rank_gpu[g.nodes[t.recv].rank];
    if (a == b) return Time::zero();
    return at_rate(s.bytes, std::min(rate_of(rates.egress, a), rate_of(rates.ingress, b)));
  }
  const Node& n = g.nodes[index.members(instance).front()];
  if (n.duration > Time::zero()) return n.duration;  // measured: it lasts exactly that
  const Communicator& comm = g.communicators[n.communicator];
  std::vector<GpuId> gpus;
  if (comm.groups.empty()) {
    for (const RankId r : comm.ranks) gpus.push_back(g.rank_gpu[r]);
  } else {
    gpus = comm.groups.front();
  }
  if (gpus.size() < 2) return Time::zero();
  return std::max(gpu_bound(g, n, gpus, rates), server_bound(g, n, gpus, rates));
}

std::vector<std::optional<Time>> path_lower_bounds(const ExecutionGraph& g, const GraphIndex& index,
                                                   const GpuLineRates& rates,
                                                   std::span<const std::pair<NodeId, NodeId>> pairs) {
  const std::size_t n = g.nodes.size();
  for (const auto& [from, to] : pairs) {
    if (to >= n || (from != kRunStart && from >= n)) {
      throw InternalError(fmt::format("path_lower_bounds: node {} or {} out of range ({} nodes)", from, to, n));
    }
  }
  const Orders o = orders_of(g, index, rates);
  std::vector<std::optional<Time>> out;
  LargeVector<std::int64_t> at;     // while an op waits: when it may start; once done: its end
  LargeVector<std::uint32_t> need;  // orders it still waits for
  std::vector<std::int64_t> starts;  // per communication instance: its last member's arrival
  std::vector<std::uint32_t> waiting;
  std::vector<NodeId> ready;
  for (const auto& pair : pairs) {
    const NodeId from = pair.first;
    const NodeId to = pair.second;
    const std::int64_t base = from == kRunStart ? 0 : kUnknown;  // unknown: not after `from`
    at.assign(n, base);
    need.assign(o.need.begin(), o.need.end());
    starts.assign(o.members.size(), kUnknown);
    waiting = o.members;
    ready.clear();
    std::size_t done = 0;
    const auto arrive = [&](NodeId d, std::int64_t t) {
      at[d] = std::max(at[d], t);
      if (--need[d] == 0) ready.push_back(d);
    };
    // The host thread reaches op m at t: it issues a GPU op after the op's dispatch and goes on
    // once every kernel of it is dispatched; a host op holds it until the op ends.
    const auto host_reaches = [&](NodeId m, std::int64_t t) {
      while (m != kNone) {
        const Node& node = g.nodes[m];
        if (node.stream == kHostStream) {
          arrive(m, t);
          return;
        }
        arrive(m, after(t, node.dispatch));
        t = after(t, node.run == kNoRun ? node.dispatch : detail::run_dispatch(g, node, 0));
        m = o.host_next[m];
      }
    };
    const auto finish = [&](NodeId m, std::int64_t t) {
      if (m == from) t = 0;
      at[m] = t;
      ++done;
      for (std::uint32_t k = index.dependents_offset[m]; k < index.dependents_offset[m + 1]; ++k) {
        arrive(index.dependents[k], t);
      }
      if (o.stream_next[m] != kNone) arrive(o.stream_next[m], t);
      if (g.nodes[m].stream == kHostStream) host_reaches(o.host_next[m], t);
    };
    for (const NodeId first : o.host_first) {
      if (first != kNone) host_reaches(first, base);
    }
    while (!ready.empty()) {
      const NodeId m = ready.back();
      ready.pop_back();
      const Node& node = g.nodes[m];
      const std::int64_t t = at[m];
      if (node.stream == kHostStream) {  // only a host op takes time there
        finish(m, node.kind == OpKind::host ? after(t, node.duration) : t);
        continue;
      }
      switch (node.kind) {
        case OpKind::compute:
        case OpKind::host:
          finish(m, after(t, node.duration));
          break;
        case OpKind::sync:
          finish(m, t);
          break;
        case OpKind::collective:
        case OpKind::send:
        case OpKind::recv: {
          const std::uint32_t c = index.comm_of[m];
          starts[c] = std::max(starts[c], t);
          if (--waiting[c] != 0) break;
          const std::int64_t end = after(starts[c], o.lasts[c]);
          if (c < index.collective_count()) {
            for (const NodeId member : index.members(c)) finish(member, end);
          } else {
            const GraphIndex::Transfer& tr = index.transfers[c - index.collective_count()];
            finish(tr.send, end);
            finish(tr.recv, end);
          }
          break;
        }
      }
    }
    if (done != n || at[to] == kUnknown) {
      out.emplace_back(std::nullopt);
    } else {
      out.emplace_back(Time::from_ps(at[to]));
    }
  }
  return out;
}

}  // namespace foresight::sim
