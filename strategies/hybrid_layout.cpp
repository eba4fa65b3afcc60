#include "strategies/hybrid_layout.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <numeric>
#include <string_view>

#include "common/error.hpp"

namespace foresight::strategy {

HybridLayout::HybridLayout(const Plan& plan, int pp, const topo::Cluster& cluster, bool ep_ranks_alike)
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
  if (dp_ > unit_) fold_replicas(plan, cluster);
}

void HybridLayout::fold_replicas(const Plan& plan, const topo::Cluster& cluster) {
  // Where replica d's GPUs sit, relative to its first GPU: the node and local-index offset of
  // each (stage, TP rank).
  std::vector<std::int64_t> placement;
  const auto relative = [&](int d) {
    placement.clear();
    const sim::GpuFacts& first = cluster.gpu(gpu(d, 0, 0));
    for (int s = 0; s < pp_; ++s) {
      for (int j = 0; j < tp_; ++j) {
        const sim::GpuFacts& a = cluster.gpu(gpu(d, s, j));
        placement.push_back(static_cast<std::int64_t>(a.node) - static_cast<std::int64_t>(first.node));
        placement.push_back(static_cast<std::int64_t>(a.local_index) - static_cast<std::int64_t>(first.local_index));
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
  if (alike) {
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
  // (a partly used last node differs). 16-GPU replicas on 72-GPU racks: 9 placements repeat
  // every two racks, and the replicas on the last rack have their own.
  std::vector<int> used(cluster.node_count(), 0);
  for (int g = 0; g < gpus(); ++g) ++used[static_cast<std::size_t>(cluster.gpu(static_cast<sim::GpuId>(g)).node)];
  std::map<std::vector<std::int64_t>, int> simulated;  // a block's placement -> its first simulated replica
  std::vector<std::int64_t> key;
  for (int b = 0; b < dp_ / block; ++b) {
    key.clear();
    const sim::GpuFacts& first = cluster.gpu(gpu(b * block, 0, 0));
    for (int d = b * block; d < (b + 1) * block; ++d) {
      for (int s = 0; s < pp_; ++s) {
        for (int j = 0; j < tp_; ++j) {
          const sim::GpuFacts& a = cluster.gpu(gpu(d, s, j));
          const sim::NodeFacts& n = cluster.node(a.node);
          key.insert(key.end(), {static_cast<std::int64_t>(a.node) - first.node,
                                 static_cast<std::int64_t>(a.local_index) - first.local_index, a.local_index, n.gpus,
                                 n.nics, used[static_cast<std::size_t>(a.node)]});
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
      by_placement_ ? fmt::format("; replicas by placement, {} simulated", live_dp()) : std::string();
  return fmt::format("{} of {} ranks simulated ({} folded{})", simulated_ranks(), gpus(), what, placements);
}

}  // namespace foresight::strategy
