#include "strategies/hybrid_layout.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <bit>
#include <map>
#include <numeric>
#include <string_view>

#include "common/error.hpp"

namespace foresight::strategy {
namespace {

/// A link as placement keys compare it: the kind of device at its other end, its rate, latency
/// and class, and its direction from the GPU's side.
using LinkKey = std::array<std::int64_t, 5>;
LinkKey link_key(const topo::Cluster& cluster, sim::LinkId l, topo::DeviceId other, bool in) {
  const sim::LinkInfo& info = cluster.link(l);
  return LinkKey{static_cast<std::int64_t>(cluster.device(other).kind),
                 std::bit_cast<std::int64_t>(info.capacity.bytes_per_second()), info.latency.ps(),
                 static_cast<std::int64_t>(info.cls), in ? 1 : 0};
}
/// GPU g's links out and in, sorted.
std::vector<LinkKey> gpu_links(const topo::Cluster& cluster, sim::GpuId g) {
  std::vector<LinkKey> keys;
  const topo::DeviceId d = cluster.gpu_device(g);
  for (const sim::LinkId l : cluster.out_links(d)) keys.push_back(link_key(cluster, l, cluster.link_ends(l).to, false));
  for (const sim::LinkId l : cluster.in_links(d)) keys.push_back(link_key(cluster, l, cluster.link_ends(l).from, true));
  std::sort(keys.begin(), keys.end());
  return keys;
}

/// What the placement of a block of replicas depends on, on the analytical network, where each
/// transfer and collective costs what it would alone: whether a node's GPUs are interchangeable
/// for traffic among them, and what a point-to-point route meets. Worked out once per node and
/// per link pool.
class PlacementFacts {
 public:
  explicit PlacementFacts(const topo::Cluster& cluster)
      : cluster_(cluster), interchangeable_(cluster.node_count(), -1) {}

  /// Whether traffic among the GPUs of `node` goes alike whichever of them it joins: the node has
  /// an NVSwitch; its GPUs have no link to one another and each has the same links (to and from
  /// the same kinds of devices, at the same rates, latencies and classes); and the route from its
  /// first GPU to each other one, and back, meets links of the same rates, latencies and classes.
  /// An NVSwitch node (DGX A100, DGX H100, a GB200 NVL72 rack) qualifies; one whose GPUs are
  /// joined directly (DGX-1's hybrid cube-mesh) or through PCIe trees does not. `gpu` is any of
  /// its GPUs.
  bool interchangeable(int node, sim::GpuId gpu) {
    signed char& known = interchangeable_[static_cast<std::size_t>(node)];
    if (known < 0) known = check(node, gpu - static_cast<sim::GpuId>(cluster_.gpu(gpu).local_index)) ? 1 : 0;
    return known == 1;
  }
  /// Appends what a point-to-point transfer from `a` to `b` meets alone: per link of its route
  /// (sim::detail::p2p_path: a send between two GPUs takes the plain route), its rate, latency
  /// and class, and its link pool's place along the route, link count and total rate (a network
  /// model shares a pool's capacity, net/link_pools.hpp). Equal for two pairs whose transfers
  /// take the same time.
  void route(sim::GpuId a, sim::GpuId b, std::vector<std::int64_t>& key) {
    if (pool_links_.empty()) {
      pool_links_.assign(cluster_.link_count(), 0);
      pool_rate_.assign(cluster_.link_count(), 0.0);
      for (sim::LinkId l = 0; l < cluster_.link_count(); ++l) {
        const std::uint32_t pool = cluster_.link_pool(l);
        ++pool_links_[pool];
        pool_rate_[pool] += cluster_.link(l).capacity.bytes_per_second();
      }
    }
    path_.clear();
    cluster_.route(a, b, -1, -1, 0, path_);
    pools_.clear();
    key.push_back(static_cast<std::int64_t>(path_.size()));
    for (const sim::LinkId l : path_) {
      const sim::LinkInfo& info = cluster_.link(l);
      const std::uint32_t pool = cluster_.link_pool(l);
      const auto place = std::find(pools_.begin(), pools_.end(), pool) - pools_.begin();
      if (place == static_cast<std::ptrdiff_t>(pools_.size())) pools_.push_back(pool);
      key.insert(key.end(), {std::bit_cast<std::int64_t>(info.capacity.bytes_per_second()), info.latency.ps(),
                             static_cast<std::int64_t>(info.cls), place, pool_links_[pool],
                             std::bit_cast<std::int64_t>(pool_rate_[pool])});
    }
  }

 private:
  std::vector<LinkKey> route_of(sim::GpuId a, sim::GpuId b) const {
    std::vector<sim::LinkId> path;
    cluster_.route(a, b, -1, -1, 0, path);
    std::vector<LinkKey> keys;
    for (const sim::LinkId l : path) keys.push_back(link_key(cluster_, l, cluster_.link_ends(l).to, false));
    return keys;
  }
  bool check(int node, sim::GpuId first) const {
    const sim::NodeFacts& n = cluster_.node(node);
    if (n.gpus == 1) return true;
    if (!n.nvswitch) return false;
    const std::vector<LinkKey> own = gpu_links(cluster_, first);
    const auto gpu_kind = static_cast<std::int64_t>(topo::DeviceKind::gpu);
    if (std::any_of(own.begin(), own.end(), [&](const LinkKey& k) { return k[0] == gpu_kind; })) return false;
    const std::vector<LinkKey> there = route_of(first, first + 1);
    const std::vector<LinkKey> back = route_of(first + 1, first);
    for (int i = 1; i < n.gpus; ++i) {
      const sim::GpuId g = first + static_cast<sim::GpuId>(i);
      if (gpu_links(cluster_, g) != own || route_of(first, g) != there || route_of(g, first) != back) return false;
    }
    return true;
  }

  const topo::Cluster& cluster_;
  std::vector<signed char> interchangeable_;  ///< per node: unknown (-1), no, yes
  std::vector<std::int64_t> pool_links_;      ///< per pool: its links
  std::vector<double> pool_rate_;             ///< per pool: their total line rate
  std::vector<sim::LinkId> path_;
  std::vector<std::uint32_t> pools_;
};

/// Per node of the cluster that holds one of the first `gpus` GPUs: an id shared by nodes of the
/// same kind (GPUs, NVSwitch and NVLink SHARP, NICs and their rate, CPU vendor, and its first
/// GPU's links), -1 for the others. A topology file may mix kinds of nodes
/// around one GPU model; replicas on nodes of other kinds never sit alike.
std::vector<int> node_kinds(const topo::Cluster& cluster, int gpus) {
  std::vector<int> kind(cluster.node_count(), -1);
  std::map<std::vector<std::int64_t>, int> kinds;
  for (sim::GpuId g = 0; g < static_cast<sim::GpuId>(gpus); ++g) {
    const sim::GpuFacts& gpu = cluster.gpu(g);
    int& k = kind[static_cast<std::size_t>(gpu.node)];
    if (k >= 0) continue;
    const sim::NodeFacts& n = cluster.node(gpu.node);
    std::vector<std::int64_t> key{n.gpus, n.nvswitch ? 1 : 0, n.nvls ? 1 : 0, n.nics,
                                  std::bit_cast<std::int64_t>(n.nic.bytes_per_second()), static_cast<std::int64_t>(n.cpu)};
    for (const LinkKey& l : gpu_links(cluster, g)) key.insert(key.end(), l.begin(), l.end());
    k = kinds.emplace(std::move(key), static_cast<int>(kinds.size())).first->second;
  }
  return kind;
}

}  // namespace

HybridLayout::HybridLayout(const Plan& plan, int pp, const topo::Cluster& cluster, bool ep_ranks_alike,
                           bool stage_groups)
    : dp_(plan.replicas()),
      pp_(pp),
      tp_(std::max(1, plan.tp)),
      ep_(std::max(1, plan.ep)),
      etp_(plan.etp()),
      ep_across_tp_(plan.ep > 1 && plan.etp() != plan.tp),
      ep_replicas_(std::max(1, plan.ep_replicas())) {
  unit_ = ep_ranks_alike ? 1 : ep_replicas_;
  // Strides by placement, innermost first ("tp-pp-dp": tp 1, pp tp, dp tp x pp).
  int stride = 1;
  for (std::size_t k = 0; k < plan.placement.size(); k += 3) {
    const std::string_view dim = std::string_view(plan.placement).substr(k, 2);
    int* target = dim == "tp" ? &stride_tp_ : dim == "pp" ? &stride_pp_ : dim == "dp" ? &stride_dp_ : nullptr;
    if (target == nullptr) {
      throw sim::ConfigError(fmt::format("plan: placement \"{}\": expected tp, pp and dp joined by '-'", plan.placement));
    }
    *target = stride;
    stride *= dim == "tp" ? tp_ : dim == "pp" ? pp_ : dp_;
  }
  if (!plan.fold || plan.has_stragglers() || static_cast<std::size_t>(gpus()) > cluster.gpu_count() ||
      !cluster.uniform_gpus(gpus())) {
    return;
  }
  // With expert TP 1 the TP ranks of a replica are EP ranks: they fold only when they route alike.
  if (tp_ > 1 && (!ep_across_tp_ || ep_ranks_alike)) {
    fold_tp_ = true;
    for (int d = 0; d < dp_ && fold_tp_; ++d) {
      for (int s = 0; s < pp_ && fold_tp_; ++s) {
        fold_tp_ = cluster.gpu(gpu(d, s, 0)).node == cluster.gpu(gpu(d, s, tp_ - 1)).node;
      }
    }
  }
  if (dp_ > unit_) fold_replicas(plan, cluster, stage_groups);
}

void HybridLayout::fold_replicas(const Plan& plan, const topo::Cluster& cluster, bool stage_groups) {
  // Where replica d's GPUs sit, relative to its first GPU: the node and local-index offset of
  // each (stage, TP rank).
  std::vector<std::int64_t> placement;
  const std::vector<int> kind = node_kinds(cluster, gpus());
  const auto relative = [&](int d) {
    placement.clear();
    const sim::GpuFacts& first = cluster.gpu(gpu(d, 0, 0));
    for (int s = 0; s < pp_; ++s) {
      for (int j = 0; j < tp_; ++j) {
        const sim::GpuFacts& a = cluster.gpu(gpu(d, s, j));
        placement.push_back(static_cast<std::int64_t>(a.node) - static_cast<std::int64_t>(first.node));
        placement.push_back(static_cast<std::int64_t>(a.local_index) - static_cast<std::int64_t>(first.local_index));
        placement.push_back(kind[static_cast<std::size_t>(a.node)]);
      }
    }
    return placement;
  };
  // Every replica sits as replica d mod unit_ does: those fold into the first unit_.
  bool alike = true;
  {
    std::vector<std::vector<std::int64_t>> firsts;
    for (int d = 0; d < unit_; ++d) firsts.push_back(relative(d));
    for (int d = unit_; d < dp_ && alike; ++d) alike = relative(d) == firsts[static_cast<std::size_t>(d % unit_)];
  }
  // The planner's bound (plan.fold_as_alike) takes one block's ranks whatever the placements.
  bounds_only_ = !alike && plan.fold_as_alike;
  if (alike || bounds_only_) {
    fold_dp_ = true;
    for (int d = 0; d < unit_; ++d) live_.push_back(d);
    for (int d = 0; d < dp_; ++d) class_of_.push_back(d % unit_);
    return;
  }
  // Only on the analytical network, where jobs never meet: a replica's timeline is then its own
  // placement's and the shared collectives'. On the flow network a replica's flows meet its
  // neighbours', and those differ between placements that repeat (a ring's exit NIC, a leaf
  // switch's uplinks), so the answer would not be the unfolded one bit for bit.
  if (plan.network != sim::NetworkKind::analytical) return;
  // Otherwise one block of replicas is simulated per placement. Experts, context-parallel groups
  // and hybrid-sharding groups are keyed by replica index (EP groups and shard groups are blocks
  // of consecutive replicas; the experts' and replicas' data-parallel groups take one replica of
  // each block): whole blocks of the least common multiple of their sizes fold, so that a
  // simulated block's groups are its own and those across blocks take one member per block.
  // Without them a block is one replica.
  const int block = std::lcm(std::lcm(ep_ > 1 ? ep_replicas_ : 1, std::max(1, plan.cp)),
                             std::lcm(unit_, plan.hybrid_shard() ? plan.shard_size() : 1));
  if (dp_ % block != 0 || dp_ == block) return;
  // Blocks sit alike when their GPUs have the same node offsets and the same local indices from
  // the block's first GPU (so the placement is the first one's moved by whole nodes, and so are
  // the replicas sharing its nodes), on nodes of the same size holding as many of the plan's GPUs
  // (a partly used last node differs); or, below, by their shape and routes.
  std::vector<int> used(cluster.node_count(), 0);
  for (int g = 0; g < gpus(); ++g) ++used[static_cast<std::size_t>(cluster.gpu(static_cast<sim::GpuId>(g)).node)];
  PlacementFacts facts(cluster);
  std::map<std::vector<std::int64_t>, int> simulated;  // a block's placement -> its first simulated replica
  std::vector<std::int64_t> key;
  std::vector<int> nodes;  // a block's nodes, in order of first GPU
  for (int b = 0; b < dp_ / block; ++b) {
    key.clear();
    const int d0 = b * block;
    const sim::GpuFacts& first = cluster.gpu(gpu(d0, 0, 0));
    // Where every stage's GPUs of the block share a node whose GPUs are interchangeable, the
    // groups inside the block (EP, TP, context-parallel and shard groups are a stage's) cost
    // the same wherever in their nodes they sit, and so does a transfer between stages whose
    // route meets the same links: the key is then the block's shape (which GPUs share a node,
    // their offsets in it, how full each node is) and the routes between its stages, not its
    // nodes and local indices. 16-GPU replicas on 72-GPU racks: those inside a rack sit alike,
    // those split 8 + 8 across two, and those on a partly used last rack. A collective joining a
    // replica's first and last stages across nodes (stage_groups: a tied embedding's) keeps the
    // exact placement.
    bool shaped = true;
    for (int s = 0; s < pp_ && shaped; ++s) {
      const int node = cluster.gpu(gpu(d0, s, 0)).node;
      for (int d = d0; d < d0 + block && shaped; ++d) {
        for (int j = 0; j < tp_ && shaped; ++j) shaped = cluster.gpu(gpu(d, s, j)).node == node;
      }
      shaped = shaped && facts.interchangeable(node, gpu(d0, s, 0));
    }
    shaped = shaped && !(stage_groups && pp_ > 1 && cluster.gpu(gpu(d0, 0, 0)).node != cluster.gpu(gpu(d0, pp_ - 1, 0)).node);
    key.push_back(shaped ? 1 : 0);
    nodes.clear();
    std::vector<int> node_first_local;
    for (int d = d0; d < d0 + block; ++d) {
      for (int s = 0; s < pp_; ++s) {
        for (int j = 0; j < tp_; ++j) {
          const sim::GpuFacts& a = cluster.gpu(gpu(d, s, j));
          const sim::NodeFacts& n = cluster.node(a.node);
          const std::int64_t load = used[static_cast<std::size_t>(a.node)];
          if (!shaped) {
            key.insert(key.end(), {static_cast<std::int64_t>(a.node) - first.node,
                                   static_cast<std::int64_t>(a.local_index) - first.local_index, a.local_index, n.gpus,
                                   n.nics, load, kind[static_cast<std::size_t>(a.node)]});
            continue;
          }
          auto at = std::find(nodes.begin(), nodes.end(), a.node);
          if (at == nodes.end()) {
            nodes.push_back(a.node);
            node_first_local.push_back(a.local_index);
            at = nodes.end() - 1;
          }
          const auto k = static_cast<std::size_t>(at - nodes.begin());
          key.insert(key.end(), {static_cast<std::int64_t>(k), a.local_index - node_first_local[k], n.gpus, n.nics, load,
                                 kind[static_cast<std::size_t>(a.node)]});
        }
      }
    }
    if (shaped && pp_ > 1) {
      // The transfers between stages, both ways (the last stage's to the first too: interleaved).
      for (int d = d0; d < d0 + block; ++d) {
        for (int s = 0; s < pp_; ++s) {
          for (int j = 0; j < tp_; ++j) {
            const sim::GpuId here = gpu(d, s, j);
            const sim::GpuId next = gpu(d, (s + 1) % pp_, j);
            facts.route(here, next, key);
            facts.route(next, here, key);
          }
        }
      }
    }
    const auto [it, added] = simulated.emplace(key, static_cast<int>(live_.size()));
    for (int i = 0; i < block; ++i) {
      if (added) live_.push_back(b * block + i);
      class_of_.push_back(it->second + i);
    }
  }
  fold_dp_ = by_placement_ = static_cast<int>(live_.size()) < dp_;
  if (!fold_dp_) {
    live_.clear();
    class_of_.clear();
  }
}

void HybridLayout::add_ranks(sim::ExecutionGraph& g) const {
  add_ranks(g, [this](int d, int s, int j) { return static_cast<std::uint32_t>(rank(d, s, j)); });
}

void HybridLayout::add_mirrors(sim::ExecutionGraph& g, sim::RankId r, int d, int s, int j) const {
  if (!fold_dp_ && !fold_tp_) return;
  g.rank_mirrors.resize(g.ranks());
  auto& mirrors = g.rank_mirrors[r];
  // In (replica, TP rank) order, the same for every stage, so that transfers between stages
  // pair mirror k with mirror k.
  for (int dd = 0; dd < dp_; ++dd) {
    if (represented_by(dd) != d) continue;
    for (int jj = 0; jj < tp_; ++jj) {
      if (!fold_tp_ && jj != j) continue;
      if (dd != real(d) || jj != j) mirrors.push_back(gpu(dd, s, jj));
    }
  }
}

std::uint32_t HybridLayout::add_dp_communicator(sim::ExecutionGraph& g, int s, int j) const {
  std::vector<sim::RankId> members;
  for (int d = 0; d < live_dp(); ++d) members.push_back(rank(d, s, j));
  if (!fold_dp_ && !fold_tp_) return g.add_communicator(std::move(members));
  std::vector<std::vector<sim::GpuId>> groups;
  for (int jj = 0; jj < tp_; ++jj) {
    if (jj != j && !fold_tp_) continue;
    std::vector<sim::GpuId>& group = groups.emplace_back();
    for (int d = 0; d < dp_; ++d) group.push_back(gpu(d, s, jj));
  }
  return g.add_communicator(std::move(members), std::move(groups));
}

std::uint32_t HybridLayout::add_dp_subgroup(sim::ExecutionGraph& g, int s, int j, int d, int size, bool shard) const {
  // Replicas of the subgroup with key `k`.
  const auto members_of = [&](int k) {
    std::vector<int> out;
    for (int dd = 0; dd < dp_; ++dd) {
      if ((shard ? dd / size : dd % size) == k) out.push_back(dd);
    }
    return out;
  };
  const auto key_of = [&](int dd) { return shard ? dd / size : dd % size; };
  const int key = key_of(real(d));
  // The simulated replicas in it: with replicas folded by placement, one block of each placement
  // (a replica group) or d's block (a shard group).
  std::vector<sim::RankId> members;
  for (int dd = 0; dd < live_dp(); ++dd) {
    if (key_of(real(dd)) == key) members.push_back(rank(dd, s, j));
  }
  if (!fold_dp_ && !fold_tp_) return g.add_communicator(std::move(members));
  // Folded: every subgroup of this kind (when replicas fold) for every TP rank (when TP folds).
  std::vector<std::vector<sim::GpuId>> groups;
  const int keys = shard ? dp_ / size : size;
  for (int k = 0; k < keys; ++k) {
    // The subgroups holding a replica that d stands for.
    const auto in_k = members_of(k);
    if (std::none_of(in_k.begin(), in_k.end(), [&](int dd) { return represented_by(dd) == d; })) continue;
    for (int jj = 0; jj < tp_; ++jj) {
      if (jj != j && !fold_tp_) continue;
      std::vector<sim::GpuId>& group = groups.emplace_back();
      for (const int dd : members_of(k)) group.push_back(gpu(dd, s, jj));
    }
  }
  // The simulated members' own group first.
  const auto own = std::find_if(groups.begin(), groups.end(), [&](const auto& grp) {
    return std::find(grp.begin(), grp.end(), gpu(real(d), s, j)) != grp.end();
  });
  std::rotate(groups.begin(), own, own + 1);
  return g.add_communicator(std::move(members), std::move(groups));
}

std::uint32_t HybridLayout::cp_communicator(sim::ExecutionGraph& g, int cp, int d, int s, int j,
                                            std::map<std::tuple<int, int, int>, std::uint32_t>& made) const {
  const std::tuple<int, int, int> key{d / cp, s, j};
  auto it = made.find(key);
  if (it == made.end()) it = made.emplace(key, add_dp_subgroup(g, s, j, d, cp, true)).first;
  return it->second;
}

std::uint32_t HybridLayout::add_tp_communicator(sim::ExecutionGraph& g, int d, int s) const {
  std::vector<sim::RankId> members;
  for (int j = 0; j < live_tp(); ++j) members.push_back(rank(d, s, j));
  if (!fold_dp_ && !fold_tp_) return g.add_communicator(std::move(members));
  std::vector<std::vector<sim::GpuId>> groups;
  for (int dd = 0; dd < dp_; ++dd) {
    if (represented_by(dd) != d) continue;
    std::vector<sim::GpuId>& group = groups.emplace_back();
    for (int j = 0; j < tp_; ++j) group.push_back(gpu(dd, s, j));
  }
  return g.add_communicator(std::move(members), std::move(groups));
}

std::uint32_t HybridLayout::add_embedding_communicator(sim::ExecutionGraph& g, int d, int j) const {
  const int last = pp_ - 1;
  std::vector<sim::RankId> members{rank(d, 0, j), rank(d, last, j)};
  if (!fold_dp_ && !fold_tp_) return g.add_communicator(std::move(members));
  std::vector<std::vector<sim::GpuId>> groups;
  for (int dd = 0; dd < dp_; ++dd) {
    if (represented_by(dd) != d) continue;
    for (int jj = 0; jj < tp_; ++jj) {
      if (!fold_tp_ && jj != j) continue;
      groups.push_back({gpu(dd, 0, jj), gpu(dd, last, jj)});
    }
  }
  return g.add_communicator(std::move(members), std::move(groups));
}

MoeRank HybridLayout::moe_rank(sim::ExecutionGraph& g, MoeRouting* routing, int d, int s, int j,
                               std::map<std::tuple<bool, int, int, int>, std::uint32_t>& made) const {
  MoeRank m;
  m.routing = routing;
  if (routing == nullptr || ep_ == 1) return m;
  const int block = ep_replicas_;  // replicas per EP group
  m.ep_rank = Plan::expert_rank_of(d, j, tp_, etp_, block);
  auto comm = [&](bool shard) {
    // Across TP ranks, an EP group is one per expert-TP rank (j mod expert TP) of its replicas.
    const auto key = std::make_tuple(shard, s, shard && ep_across_tp_ ? j % etp_ : j, shard ? d / block : d % block);
    auto it = made.find(key);
    if (it == made.end()) {
      const std::uint32_t c =
          shard && ep_across_tp_ ? add_ep_across_tp(g, s, d, j) : add_dp_subgroup(g, s, j, d, block, shard);
      it = made.emplace(key, c).first;
    }
    return it->second;
  };
  m.ep_comm = comm(true);
  m.expert_dp = dp_ > block;
  if (m.expert_dp) m.expert_dp_comm = comm(false);
  if (etp_ > 1 && etp_ < tp_) {
    // The expert-TP group: etp consecutive TP ranks (keyed apart from the EP and expert-data
    // groups by a negative stage).
    const auto key = std::make_tuple(false, -1 - s, j / etp_, d);
    auto it = made.find(key);
    if (it == made.end()) it = made.emplace(key, add_etp_communicator(g, s, d, j)).first;
    m.etp_comm = it->second;
  }
  return m;
}

std::uint32_t HybridLayout::add_etp_communicator(sim::ExecutionGraph& g, int s, int d, int j) const {
  const int q = j / etp_;
  std::vector<sim::RankId> members;
  for (int jj = q * etp_; jj < (q + 1) * etp_ && jj < live_tp(); ++jj) members.push_back(rank(d, s, jj));
  if (!fold_dp_ && !fold_tp_) return g.add_communicator(std::move(members));
  std::vector<std::vector<sim::GpuId>> groups;
  for (int dd = 0; dd < dp_; ++dd) {
    if (represented_by(dd) != d) continue;
    for (int qq = 0; qq < tp_ / etp_; ++qq) {
      if (!fold_tp_ && qq != q) continue;
      std::vector<sim::GpuId>& group = groups.emplace_back();
      for (int r = 0; r < etp_; ++r) group.push_back(gpu(dd, s, qq * etp_ + r));
    }
  }
  const auto own = std::find_if(groups.begin(), groups.end(), [&](const auto& grp) {
    return std::find(grp.begin(), grp.end(), gpu(real(d), s, j)) != grp.end();
  });
  std::rotate(groups.begin(), own, own + 1);
  return g.add_communicator(std::move(members), std::move(groups));
}

std::uint32_t HybridLayout::add_ep_across_tp(sim::ExecutionGraph& g, int s, int d, int j) const {
  // Replica d's block of ep_replicas_ replicas, the TP ranks of each whose expert-TP rank is j's:
  // EP rank (TP rank + tp x place in the block) / expert TP, which is the communicator rank
  // order (replica-major, then TP rank).
  const int block = ep_replicas_;
  const int k = d / block;
  const int r = j % etp_;
  std::vector<sim::RankId> members;
  for (int dd = k * block; dd < (k + 1) * block && dd < live_dp(); ++dd) {
    for (int jj = r; jj < live_tp(); jj += etp_) members.push_back(rank(dd, s, jj));
  }
  if (!fold_dp_ && !fold_tp_) return g.add_communicator(std::move(members));
  // Folded: every block whose replicas the simulated ones stand for, for j's expert-TP rank or,
  // with TP ranks folded, each (j's group first).
  std::vector<std::vector<sim::GpuId>> groups;
  for (int kk = 0; kk < dp_ / block; ++kk) {
    bool represented = false;
    for (int dd = kk * block; dd < (kk + 1) * block; ++dd) represented = represented || represented_by(dd) / block == k;
    if (!represented) continue;
    for (int rr = 0; rr < etp_; ++rr) {
      if (!fold_tp_ && rr != r) continue;
      std::vector<sim::GpuId>& group = groups.emplace_back();
      for (int dd = kk * block; dd < (kk + 1) * block; ++dd) {
        for (int jj = rr; jj < tp_; jj += etp_) group.push_back(gpu(dd, s, jj));
      }
    }
  }
  const auto own = std::find_if(groups.begin(), groups.end(), [&](const auto& grp) {
    return std::find(grp.begin(), grp.end(), gpu(real(d), s, j)) != grp.end();
  });
  std::rotate(groups.begin(), own, own + 1);
  return g.add_communicator(std::move(members), std::move(groups));
}

HybridLayout::RankCommunicators HybridLayout::add_data_parallel_communicators(sim::ExecutionGraph& g,
                                                                              const Plan& plan) const {
  const std::size_t ranks = g.ranks();
  RankCommunicators out{std::vector<std::uint32_t>(ranks), std::vector<std::uint32_t>(ranks),
                        std::vector<std::uint32_t>(ranks, kNoReplicaGroup)};
  for (int j = 0; j < live_tp(); ++j) {
    if (!plan.hybrid_shard()) {
      const auto c = add_dp_communicator(g, 0, j);
      for (int d = 0; d < live_dp(); ++d) out.dp[rank(d, 0, j)] = c;
      continue;
    }
    // Hybrid sharding: ZeRO's collectives run in the shard group, gradient shards are
    // all-reduced over the replica group. One communicator per subgroup.
    const int size = plan.shard_size();
    std::map<std::pair<bool, int>, std::uint32_t> made;
    for (int d = 0; d < live_dp(); ++d) {
      for (const bool shard : {true, false}) {
        const std::pair<bool, int> key{shard, shard ? d / size : d % size};
        auto it = made.find(key);
        if (it == made.end()) it = made.emplace(key, add_dp_subgroup(g, 0, j, d, size, shard)).first;
        (shard ? out.dp : out.replica)[rank(d, 0, j)] = it->second;
      }
    }
  }
  if (tp_ > 1) {
    for (int d = 0; d < live_dp(); ++d) {
      const auto c = add_tp_communicator(g, d, 0);
      for (int j = 0; j < live_tp(); ++j) out.tp[rank(d, 0, j)] = c;
    }
  }
  return out;
}

std::string HybridLayout::describe() const {
  if (!fold_dp_ && !fold_tp_) return "";
  const char* replicas = ep_ == 1      ? "data-parallel replicas"
                         : folds_ep() ? "data-parallel replicas and expert-parallel ranks (alike routing)"
                                      : "expert-parallel groups";
  const std::string what = fold_dp_ && fold_tp_ ? fmt::format("{} and tensor-parallel ranks", replicas)
                           : fold_dp_           ? std::string(replicas)
                                                : std::string("tensor-parallel ranks");
  const std::string placements =
      by_placement_  ? fmt::format("; replicas by placement, {} simulated", live_dp())
      : bounds_only_ ? std::string("; every placement as the first, to bound it")
                     : std::string();
  return fmt::format("{} of {} ranks simulated ({} folded{})", simulated_ranks(), gpus(), what, placements);
}

}  // namespace foresight::strategy
