// Route tables and the route walk of topo::Cluster (see cluster.hpp for the routing rules).

#include <fmt/core.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "common/splitmix.hpp"
#include "topologies/detail/cluster_impl.hpp"

namespace foresight::topo::detail {
namespace {

using sim::LinkId;

/// The ECMP choice among `count` equal-cost candidates at hop `hop` of the route src -> dst.
std::size_t ecmp_pick(std::size_t count, std::uint32_t src, std::uint32_t dst, std::uint64_t salt,
                      std::size_t hop) {
  if (count <= 1) return 0;
  const std::uint64_t h =
      splitmix64(splitmix64(splitmix64((std::uint64_t{src} << 32) | dst) ^ salt) + hop);
  return static_cast<std::size_t>(h % count);
}

bool is_gpu(const ClusterImpl& c, DeviceId v) { return c.devices[v].kind == DeviceKind::gpu; }

/// Identifies one route call for the ECMP hash.
struct RouteKey {
  std::uint32_t src;
  std::uint32_t dst;
  std::uint64_t salt;
  std::size_t start;  ///< out.size() when the route began: hop index = out.size() - start
  bool by_destination = false;  ///< FabricRouting::destination, in the switch fabric only
};

/// The choice among `count` equal-cost candidates for this route at its current hop.
std::size_t pick_index(std::size_t count, const RouteKey& key, std::size_t hop) {
  if (key.by_destination) return count == 0 ? 0 : key.dst % count;
  return ecmp_pick(count, key.src, key.dst, key.salt, hop);
}

/// Picks, among the links of `links` that satisfy `ok`, the one `choose(count)` indexes: a first
/// pass counts, a second finds the chosen one (no allocation).
template <typename Pred, typename Choose>
LinkId pick_nth(std::span<const LinkId> links, Pred ok, Choose choose) {
  std::size_t count = 0;
  for (LinkId l : links) count += ok(l) ? 1 : 0;
  if (count == 0) throw sim::InternalError("route: no next hop on a reachable path");
  std::size_t k = choose(count);
  for (LinkId l : links) {
    if (ok(l) && k-- == 0) return l;
  }
  throw sim::InternalError("route: pick out of range");
}

/// The link among those satisfying `ok` that the route's hash (or destination) selects.
template <typename Pred>
LinkId pick_link(std::span<const LinkId> links, Pred ok, const RouteKey& key,
                 const std::vector<LinkId>& out) {
  return pick_nth(links, ok, [&](std::size_t count) { return pick_index(count, key, out.size() - key.start); });
}

// ---------------------------------------------------------------------------------------------
// Intra-node tables

void build_node_tables(ClusterImpl& c) {
  const std::size_t v_count = c.devices.size();
  c.local_of.assign(v_count, kNone);
  c.node_tables.assign(c.node_facts.size(), NodeTable{});
  for (DeviceId v = 0; v < v_count; ++v) {
    const int node = c.devices[v].node;
    if (node < 0) continue;
    auto& table = c.node_tables[static_cast<std::size_t>(node)];
    c.local_of[v] = static_cast<std::uint32_t>(table.devices.size());
    table.devices.push_back(v);
  }
  using Entry = std::pair<std::uint32_t, std::uint32_t>;  // (cost, local vertex)
  for (std::size_t node = 0; node < c.node_tables.size(); ++node) {
    auto& table = c.node_tables[node];
    const std::size_t n = table.devices.size();
    if (n >= 0xFFFF) {
      throw sim::TopologyError(fmt::format(
          "node {} has {} devices; at most 65534 devices per node are supported", node, n));
    }
    table.cost.assign(n * n, kNone);
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
    for (std::uint32_t t = 0; t < n; ++t) {
      std::uint32_t* dist = table.cost.data() + static_cast<std::size_t>(t) * n;
      dist[t] = 0;
      queue.emplace(0, t);
      // Dijkstra towards t over reversed links: cost(u -> v) = the link's weight, plus a transit
      // when v is a GPU other than t.
      while (!queue.empty()) {
        const auto [d, vl] = queue.top();
        queue.pop();
        if (d != dist[vl]) continue;
        const DeviceId v = table.devices[vl];
        const std::uint32_t transit = (vl != t && is_gpu(c, v)) ? kGpuTransit : 0;
        for (LinkId l : c.in.of(v)) {
          const DeviceId u = c.ends[l].from;
          if (c.devices[u].node != static_cast<int>(node)) continue;
          const std::uint32_t step = c.weights[l] + transit;
          const std::uint32_t ul = c.local_of[u];
          if (d + step < dist[ul]) {
            dist[ul] = d + step;
            queue.emplace(d + step, ul);
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Switch fabric tables

bool is_switch(const DeviceInfo& d) {
  return d.kind == DeviceKind::ib_leaf || d.kind == DeviceKind::ib_spine;
}

void build_fabric_table(ClusterImpl& c) {
  FabricTable& f = c.fabric;
  const std::size_t v_count = c.devices.size();
  f.switch_index.assign(v_count, kNone);
  f.switches.clear();
  for (DeviceId v = 0; v < v_count; ++v) {
    if (is_switch(c.devices[v])) {
      f.switch_index[v] = static_cast<std::uint32_t>(f.switches.size());
      f.switches.push_back(v);
    }
  }
  const std::size_t s_count = f.switches.size();
  if (s_count >= FabricTable::kFar) {
    throw sim::TopologyError(
        fmt::format("{} InfiniBand switches; at most 65534 are supported", s_count));
  }
  // Hop counts through switches only from every switch to every target switch (one with a
  // link into a NIC): one backward BFS per target. Fabric switches without NICs (spines) are
  // never a route's destination, which keeps the table and its cost at S x targets.
  f.target_index.assign(s_count, kNone);
  std::uint32_t targets = 0;
  for (std::uint32_t s = 0; s < s_count; ++s) {
    for (LinkId l : c.out.of(f.switches[s])) {
      if (f.switch_index[c.ends[l].to] == kNone) {
        f.target_index[s] = targets++;
        break;
      }
    }
  }
  f.hops.assign(static_cast<std::size_t>(targets) * s_count, FabricTable::kFar);
  // The BFS runs for 64 targets at once: each switch holds a bit per target, set once that
  // target's search has reached it, and a level gives every newly reached (switch, target) its
  // depth. The counts are each target's own BFS distances; a level visits each link once for
  // all 64, so a 65,536-GPU fabric's ~3,300 targets cost ~52 passes instead of ~3,300.
  std::vector<std::uint32_t> target_switch(targets);
  for (std::uint32_t s = 0; s < s_count; ++s) {
    if (f.target_index[s] != kNone) target_switch[f.target_index[s]] = s;
  }
  std::vector<std::uint64_t> seen(s_count);
  std::vector<std::uint64_t> frontier_bits(s_count, 0);
  std::vector<std::uint64_t> next_bits(s_count, 0);
  std::vector<std::uint32_t> frontier;
  std::vector<std::uint32_t> next;
  for (std::uint32_t first = 0; first < targets; first += 64) {
    const std::uint32_t batch = std::min<std::uint32_t>(64, targets - first);
    std::fill(seen.begin(), seen.end(), 0);
    frontier.clear();
    for (std::uint32_t k = 0; k < batch; ++k) {
      const std::uint32_t b = target_switch[first + k];
      const std::uint64_t bit = std::uint64_t{1} << k;
      seen[b] |= bit;
      if (frontier_bits[b] == 0) frontier.push_back(b);
      frontier_bits[b] |= bit;
      f.hops[static_cast<std::size_t>(first + k) * s_count + b] = 0;
    }
    for (std::uint16_t depth = 1; !frontier.empty(); ++depth) {
      next.clear();
      for (const std::uint32_t s : frontier) {
        const std::uint64_t bits = frontier_bits[s];
        for (LinkId l : c.in.of(f.switches[s])) {
          const std::uint32_t a = f.switch_index[c.ends[l].from];
          if (a == kNone) continue;
          const std::uint64_t fresh = bits & ~seen[a];
          if (fresh == 0) continue;
          if (next_bits[a] == 0) next.push_back(a);
          next_bits[a] |= fresh;
        }
      }
      for (const std::uint32_t s : frontier) frontier_bits[s] = 0;
      for (const std::uint32_t a : next) {
        seen[a] |= next_bits[a];
        for (std::uint64_t bits = next_bits[a]; bits != 0; bits &= bits - 1) {
          const auto k = static_cast<std::uint32_t>(std::countr_zero(bits));
          f.hops[static_cast<std::size_t>(first + k) * s_count + a] = depth;
        }
      }
      frontier_bits.swap(next_bits);
      frontier.swap(next);
    }
  }
  // Switches leading into each device (used for NICs).
  f.attach_offset.assign(v_count + 1, 0);
  f.attach.clear();
  for (DeviceId v = 0; v < v_count; ++v) {
    f.attach_offset[v] = static_cast<std::uint32_t>(f.attach.size());
    const std::size_t first = f.attach.size();
    for (LinkId l : c.in.of(v)) {
      const DeviceId u = c.ends[l].from;
      if (f.switch_index[u] != kNone) f.attach.push_back(u);
    }
    std::sort(f.attach.begin() + static_cast<std::ptrdiff_t>(first), f.attach.end());
    f.attach.erase(
        std::unique(f.attach.begin() + static_cast<std::ptrdiff_t>(first), f.attach.end()),
        f.attach.end());
  }
  f.attach_offset[v_count] = static_cast<std::uint32_t>(f.attach.size());
  f.nic_ordinal.assign(v_count, 0);
  std::uint32_t ordinal = 0;
  for (DeviceId v = 0; v < v_count; ++v) {
    if (f.attach_offset[v + 1] > f.attach_offset[v]) f.nic_ordinal[v] = ordinal++;
  }
  // Out-links of each switch sorted by (target, link id).
  f.by_target_offset.assign(s_count + 1, 0);
  f.by_target.clear();
  for (std::uint32_t s = 0; s < s_count; ++s) {
    f.by_target_offset[s] = static_cast<std::uint32_t>(f.by_target.size());
    const std::size_t first = f.by_target.size();
    for (LinkId l : c.out.of(f.switches[s])) f.by_target.emplace_back(c.ends[l].to, l);
    std::sort(f.by_target.begin() + static_cast<std::ptrdiff_t>(first), f.by_target.end());
  }
  f.by_target_offset[s_count] = static_cast<std::uint32_t>(f.by_target.size());
}

/// Hops from switch `w` to NIC `d` through switches only; kFar-ish (large) when unreachable.
std::uint32_t switch_to_nic(const FabricTable& f, DeviceId w, DeviceId d) {
  std::uint32_t best = std::numeric_limits<std::uint32_t>::max();
  const std::uint32_t ws = f.switch_index[w];
  for (DeviceId a : f.attached(d)) {
    const std::uint16_t h = f.hop(ws, f.switch_index[a]);
    if (h != FabricTable::kFar) best = std::min<std::uint32_t>(best, h + 1u);
  }
  return best;
}

constexpr std::uint32_t kFarAway = std::numeric_limits<std::uint32_t>::max();

/// Hops from NIC `s` to NIC `d` through switches only (a direct NIC-NIC link counts as 1).
std::uint32_t nic_to_nic(const ClusterImpl& c, DeviceId s, DeviceId d) {
  std::uint32_t best = kFarAway;
  for (LinkId l : c.out.of(s)) {
    const DeviceId x = c.ends[l].to;
    if (x == d) return 1;
    if (c.fabric.switch_index[x] == kNone) continue;
    const std::uint32_t h = switch_to_nic(c.fabric, x, d);
    if (h != kFarAway) best = std::min(best, h + 1);
  }
  return best;
}

/// The links of switch `s` (switch index) whose target is `target`, in link id order.
std::span<const std::pair<DeviceId, LinkId>> links_to(const FabricTable& f, std::uint32_t s,
                                                      DeviceId target) {
  const auto* first = f.by_target.data() + f.by_target_offset[s];
  const auto* last = f.by_target.data() + f.by_target_offset[s + 1];
  const auto lo = std::lower_bound(first, last, std::pair<DeviceId, LinkId>{target, 0});
  const auto* hi = lo;
  while (hi != last && hi->first == target) ++hi;
  return {lo, hi};
}

// ---------------------------------------------------------------------------------------------
// Walks

/// Appends the intra-node path from device u to device t (same node, reachable).
void walk_node(const ClusterImpl& c, DeviceId u_dev, DeviceId t_dev, const RouteKey& key,
               std::vector<LinkId>& out) {
  const int node = c.devices[u_dev].node;
  const NodeTable& table = c.node_tables[static_cast<std::size_t>(node)];
  const std::uint32_t t = c.local_of[t_dev];
  std::uint32_t u = c.local_of[u_dev];
  while (u != t) {
    const std::uint32_t remaining = table.cost_to(t, u);
    const auto ok = [&](LinkId l) {
      const DeviceId v = c.ends[l].to;
      if (c.devices[v].node != node) return false;
      const std::uint32_t vl = c.local_of[v];
      const std::uint32_t rest = table.cost_to(t, vl);
      if (rest == kNone) return false;
      const std::uint32_t step = c.weights[l] + ((vl != t && is_gpu(c, v)) ? kGpuTransit : 0);
      return step + rest == remaining;
    };
    const LinkId l = pick_link(c.out.of(table.devices[u]), ok, key, out);
    out.push_back(l);
    u = c.local_of[c.ends[l].to];
  }
}

/// Appends the fabric path from NIC s to NIC d, `hops` long (= nic_to_nic(s, d) < kFarAway).
void walk_fabric(const ClusterImpl& c, DeviceId s, DeviceId d, std::uint32_t hops,
                 const RouteKey& key, std::vector<LinkId>& out) {
  const FabricTable& f = c.fabric;
  // Adaptive routing spreads a leaf's traffic over all its uplinks and each middle switch's over
  // its own: on the way up, the k-th choice takes digit k of the source NIC's ordinal (its port
  // on the leaf, then its leaf's place in the pod, ...), as fat-tree routing engines do, so that
  // a non-blocking tree carries one NIC per uplink and its pools hold the load they can carry.
  const bool spread_up = c.routing == FabricRouting::adaptive;
  std::uint64_t spread = f.nic_ordinal[s];
  DeviceId u = s;
  for (std::uint32_t remaining = hops; remaining > 0; --remaining) {
    const std::uint32_t us = f.switch_index[u];
    LinkId chosen = 0;
    if (us != kNone && remaining <= 2) {
      // Fast path at a switch next to d's switches: the candidates are the links into d
      // (remaining 1) or into the switches attached to d (remaining 2).
      const auto attached = f.attached(d);
      if (remaining == 1 || attached.size() == 1) {
        const auto range = links_to(f, us, remaining == 1 ? d : attached.front());
        if (range.empty()) throw sim::InternalError("route: fabric table inconsistent");
        chosen = range[pick_index(range.size(), key, out.size() - key.start)]
                     .second;
      } else {
        std::vector<LinkId> candidates;
        for (DeviceId a : attached) {
          for (const auto& [target, l] : links_to(f, us, a)) candidates.push_back(l);
        }
        std::sort(candidates.begin(), candidates.end());
        if (candidates.empty()) throw sim::InternalError("route: fabric table inconsistent");
        chosen = candidates[pick_index(candidates.size(), key, out.size() - key.start)];
      }
    } else {
      const auto ok = [&](LinkId l) {
        const DeviceId x = c.ends[l].to;
        if (x == d) return remaining == 1;
        if (f.switch_index[x] == kNone) return false;
        return switch_to_nic(f, x, d) == remaining - 1;
      };
      if (spread_up && us != kNone) {
        chosen = pick_nth(c.out.of(u), ok, [&](std::size_t count) {
          const auto k = static_cast<std::size_t>(spread % count);
          spread /= count;
          return k;
        });
      } else {
        chosen = pick_link(c.out.of(u), ok, key, out);
      }
    }
    out.push_back(chosen);
    u = c.ends[chosen].to;
  }
}

/// Cheapest path over the whole graph, cost (GPU transits, link weights), computed on the fly.
void walk_anywhere(const ClusterImpl& c, DeviceId src, DeviceId dst, const RouteKey& key,
                   std::vector<LinkId>& out) {
  constexpr std::uint64_t kTransit = std::uint64_t{1} << 32;
  constexpr std::uint64_t kInf = std::numeric_limits<std::uint64_t>::max();
  std::vector<std::uint64_t> dist(c.devices.size(), kInf);
  using Entry = std::pair<std::uint64_t, DeviceId>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  dist[dst] = 0;
  queue.emplace(0, dst);
  while (!queue.empty()) {
    const auto [d, v] = queue.top();
    queue.pop();
    if (d != dist[v]) continue;
    const std::uint64_t transit = (v != dst && is_gpu(c, v)) ? kTransit : 0;
    for (LinkId l : c.in.of(v)) {
      const DeviceId u = c.ends[l].from;
      const std::uint64_t step = c.weights[l] + transit;
      if (d + step < dist[u]) {
        dist[u] = d + step;
        queue.emplace(d + step, u);
      }
    }
  }
  if (dist[src] == kInf) {
    throw sim::InternalError(
        fmt::format("route: no path from {} to {}", c.devices[src].name, c.devices[dst].name));
  }
  DeviceId u = src;
  while (u != dst) {
    const auto ok = [&](LinkId l) {
      const DeviceId v = c.ends[l].to;
      if (dist[v] == kInf) return false;
      const std::uint64_t step = c.weights[l] + ((v != dst && is_gpu(c, v)) ? kTransit : 0);
      return step + dist[v] == dist[u];
    };
    const LinkId l = pick_link(c.out.of(u), ok, key, out);
    out.push_back(l);
    u = c.ends[l].to;
  }
}

/// Per device: a switch's hop count through switches from the nearest switch with a link into a
/// device that is not a switch (a leaf: 0); kNone for other devices and unreachable switches.
std::vector<std::uint32_t> switch_levels(const ClusterImpl& c) {
  std::vector<std::uint32_t> level(c.devices.size(), kNone);
  std::vector<DeviceId> frontier;
  for (DeviceId v = 0; v < c.devices.size(); ++v) {
    if (!is_switch(c.devices[v])) continue;
    for (LinkId l : c.out.of(v)) {
      if (!is_switch(c.devices[c.ends[l].to])) {
        level[v] = 0;
        frontier.push_back(v);
        break;
      }
    }
  }
  std::vector<DeviceId> next;
  for (std::uint32_t depth = 1; !frontier.empty(); ++depth) {
    next.clear();
    for (DeviceId u : frontier) {
      for (LinkId l : c.out.of(u)) {
        const DeviceId v = c.ends[l].to;
        if (!is_switch(c.devices[v]) || level[v] != kNone) continue;
        level[v] = depth;
        next.push_back(v);
      }
    }
    frontier.swap(next);
  }
  return level;
}

}  // namespace

std::uint32_t link_weight(sim::Bandwidth line_rate) {
  const double w = std::ceil(1e12 / line_rate.bytes_per_second());
  return static_cast<std::uint32_t>(std::clamp(w, 1.0, 50000.0));
}

void build_route_tables(ClusterImpl& c) {
  c.weights.resize(c.links.size());
  for (std::size_t l = 0; l < c.links.size(); ++l) c.weights[l] = link_weight(c.links[l].capacity);
  // Capacity pools: with adaptive routing, a switch's links to the level above are one pool and
  // the links from the level above into a switch another (a leaf's uplinks to the spines; in a
  // three-level tree also a middle switch's uplinks to the top). A switch's level is its hop
  // count from the nearest switch with a NIC attached (leaves: 0). Every other link is its own
  // pool.
  c.pools.resize(c.links.size());
  for (std::size_t l = 0; l < c.links.size(); ++l) c.pools[l] = static_cast<std::uint32_t>(l);
  if (c.routing == FabricRouting::adaptive) {
    const auto level = switch_levels(c);
    std::map<std::pair<DeviceId, bool>, std::uint32_t> pool_of;  // (lower switch, upward)
    for (std::size_t l = 0; l < c.links.size(); ++l) {
      const DeviceId from = c.ends[l].from;
      const DeviceId to = c.ends[l].to;
      if (level[from] == kNone || level[to] == kNone) continue;
      if (level[to] == level[from] + 1) {
        c.pools[l] = pool_of.try_emplace({from, true}, static_cast<std::uint32_t>(l)).first->second;
      } else if (level[from] == level[to] + 1) {
        c.pools[l] = pool_of.try_emplace({to, false}, static_cast<std::uint32_t>(l)).first->second;
      }
    }
  }
  build_node_tables(c);
  build_fabric_table(c);

  // Primary rail: the NIC with the lowest intra-node cost from the GPU; ties go to the rail equal
  // to the GPU's local index, then to the lowest rail. Unreachable NICs rank last.
  c.primary_rails.assign(c.gpu_devices.size(), -1);
  for (std::size_t g = 0; g < c.gpu_devices.size(); ++g) {
    const DeviceId gpu = c.gpu_devices[g];
    const int node = c.devices[gpu].node;
    const auto& nics = c.node_nics[static_cast<std::size_t>(node)];
    const NodeTable& table = c.node_tables[static_cast<std::size_t>(node)];
    const int local = c.devices[gpu].local_index;
    int best = -1;
    std::uint32_t best_cost = 0;
    for (int rail = 0; rail < static_cast<int>(nics.size()); ++rail) {
      const std::uint32_t cost =
          table.cost_to(c.local_of[nics[static_cast<std::size_t>(rail)]], c.local_of[gpu]);
      const bool better = best < 0 || cost < best_cost || (cost == best_cost && rail == local);
      if (better) {
        best = rail;
        best_cost = cost;
      }
    }
    c.primary_rails[g] = best;
  }
}

void compute_route(const ClusterImpl& c, sim::GpuId src, sim::GpuId dst, int src_rail, int dst_rail,
                   std::uint64_t salt, std::vector<LinkId>& out) {
  const DeviceId s = c.gpu_devices[src];
  const DeviceId d = c.gpu_devices[dst];
  const RouteKey key{src, dst, salt, out.size()};
  const int s_node = c.devices[s].node;
  const int d_node = c.devices[d].node;

  if (s_node == d_node) {
    const NodeTable& table = c.node_tables[static_cast<std::size_t>(s_node)];
    if (table.cost_to(c.local_of[d], c.local_of[s]) != kNone) {
      walk_node(c, s, d, key, out);
    } else {
      walk_anywhere(c, s, d, key, out);
    }
    return;
  }

  const auto& s_nics = c.node_nics[static_cast<std::size_t>(s_node)];
  const auto& d_nics = c.node_nics[static_cast<std::size_t>(d_node)];
  if (s_nics.empty() || d_nics.empty()) {
    walk_anywhere(c, s, d, key, out);
    return;
  }
  const int sr = src_rail < 0 ? c.primary_rails[src] : src_rail;
  const int dr = dst_rail < 0 ? c.primary_rails[dst] : dst_rail;
  const DeviceId s_nic = s_nics[static_cast<std::size_t>(sr)];
  const DeviceId d_nic = d_nics[static_cast<std::size_t>(dr)];
  const NodeTable& s_table = c.node_tables[static_cast<std::size_t>(s_node)];
  const NodeTable& d_table = c.node_tables[static_cast<std::size_t>(d_node)];
  const bool s_ok = s_table.cost_to(c.local_of[s_nic], c.local_of[s]) != kNone;
  const bool d_ok = d_table.cost_to(c.local_of[d], c.local_of[d_nic]) != kNone;
  const std::uint32_t fabric_hops = (s_ok && d_ok) ? nic_to_nic(c, s_nic, d_nic) : kFarAway;
  if (fabric_hops == kFarAway) {
    walk_anywhere(c, s, d, key, out);
    return;
  }
  walk_node(c, s, s_nic, key, out);
  RouteKey fabric_key = key;
  fabric_key.by_destination = c.routing == FabricRouting::destination;
  walk_fabric(c, s_nic, d_nic, fabric_hops, fabric_key, out);
  walk_node(c, d_nic, d, key, out);
}

}  // namespace foresight::topo::detail
