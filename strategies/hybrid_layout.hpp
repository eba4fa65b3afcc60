#pragma once
/// Where the ranks of a dp x pp x tp plan run, and which of them are simulated.
///
/// Placement is Megatron's by default (plan.placement "tp-pp-dp"): TP rank j of stage s of
/// replica d runs on GPU (d x pp + s) x tp + j, so TP groups are consecutive GPUs (inside a node
/// when tp divides its GPUs), then the pipeline, then data parallelism. Another order of the
/// three, innermost first, overrides it.
///
/// Folding (docs/architecture.md, "Identical ranks"): data-parallel replicas run identical programs, and so
/// do the TP ranks of a stage. When they also sit alike on the hardware, only replica 0 and TP
/// rank 0 of each stage are simulated. Their communicators stand for every real group
/// (sim::Communicator::groups) and their transfers carry the mirrors' copies
/// (ExecutionGraph::rank_mirrors), so each collective and transfer still moves every byte the
/// full job moves, on the same links at the same time: the folded run gives the full run's
/// answer while its graph grows with pp, not with the GPU count.
///
/// With expert parallelism (ep > 1) the replicas of one EP group route different loads, so
/// only whole EP groups fold: replica d stands for replicas d + k ep. When every EP rank routes
/// the same tokens to its experts (balanced routing: MoeRouting::ranks_alike), the EP ranks are
/// identical too and replica 0 stands for every replica. With expert TP 1 (plan.expert_tp) an
/// EP group takes every TP rank of ep / tp replicas: whole blocks of them fold, and the TP ranks
/// fold only with alike routing.
///
/// TP folds when every TP group is inside one node; replicas fold when every replica's GPUs
/// sit on their nodes as the replica standing for them does (the same node and local-index offsets from the
/// replica's first GPU, so the same stage boundaries cross nodes). On the analytical network
/// (where jobs never meet) one replica is simulated per placement otherwise: where replicas
/// straddle nodes in different ways (16-GPU replicas on 72-GPU racks: those inside a rack, and
/// those split 8 + 8 across two), the first replica of each placement stands for the others of
/// it, and the simulated replicas are not consecutive (real(d)). Where each stage's GPUs of a
/// replica share a node whose GPUs are interchangeable (an NVSwitch node), where in the node
/// and which node do not matter: replicas of the same shape whose transfers between stages meet
/// the same links sit alike (fold_replicas). With experts, context
/// parallelism or hybrid sharding, whose groups are blocks of consecutive replicas, whole blocks
/// (of the least common multiple of those groups' sizes) fold so, compared from each block's
/// first GPU. Neither folds
/// when the plan says `fold: false` or the GPUs are not all of one model (a straggler would be
/// one too). The planner's bound (plan.fold_as_alike) folds every block into the first whatever
/// the placements: a graph to bound a plan on (bounds_only), never to simulate.

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "exec/execution_graph.hpp"
#include "strategies/moe.hpp"
#include "strategies/plan.hpp"
#include "topologies/cluster.hpp"

namespace foresight::strategy {

class HybridLayout {
 public:
  /// `pp` stages per replica (1 without a pipeline); plan.dp and plan.tp from the plan;
  /// `ep_ranks_alike`: every EP rank runs the same expert kernels (MoeRouting::ranks_alike).
  /// `stage_groups`: a collective joins each replica's first and last stages (a tied
  /// embedding's group), which folding by placement must keep where it is.
  HybridLayout(const Plan& plan, int pp, const topo::Cluster& cluster, bool ep_ranks_alike = false,
               bool stage_groups = true);

  int dp() const { return dp_; }
  int pp() const { return pp_; }
  int tp() const { return tp_; }
  /// Replicas and TP ranks per stage that are simulated (1 when folded; with expert
  /// parallelism the ep replicas of one EP group, whose routed loads differ, unless they are
  /// alike).
  int live_dp() const { return fold_dp_ ? static_cast<int>(live_.size()) : dp_; }
  /// The replica that simulated replica d (< live_dp) is: the first of those it stands for.
  int real(int d) const { return fold_dp_ ? live_[static_cast<std::size_t>(d)] : d; }
  /// Expert-parallel ranks fold into one (ep > 1 with alike ranks).
  bool folds_ep() const { return fold_dp_ && ep_ > 1 && unit_ == 1 && !by_placement_; }
  int live_tp() const { return fold_tp_ ? 1 : tp_; }
  bool folds_dp() const { return fold_dp_; }
  /// Replicas fold as if alike though they are not (plan.fold_as_alike): the graph bounds the
  /// plan (its ranks' programs, memory and own groups are real) but must not be simulated.
  bool bounds_only() const { return bounds_only_; }
  bool folds_tp() const { return fold_tp_; }
  int gpus() const { return dp_ * pp_ * tp_; }
  int simulated_ranks() const { return live_dp() * pp_ * live_tp(); }

  /// The GPU of TP rank j of stage s of replica d, by the plan's placement order.
  sim::GpuId gpu(int d, int s, int j) const {
    return static_cast<sim::GpuId>(d * stride_dp_ + s * stride_pp_ + j * stride_tp_);
  }
  /// The graph rank of simulated (d < live_dp, s, j < live_tp).
  sim::RankId rank(int d, int s, int j) const { return static_cast<sim::RankId>((d * pp_ + s) * live_tp() + j); }

  /// Adds the simulated ranks to `g` in rank order, each with its own host thread and its
  /// mirrors; `process_of(d, s, j)` gives a rank's host process (empty host_process when null).
  template <typename ProcessOf>
  void add_ranks(sim::ExecutionGraph& g, ProcessOf process_of) const {
    for (int d = 0; d < live_dp(); ++d) {
      for (int s = 0; s < pp_; ++s) {
        for (int j = 0; j < live_tp(); ++j) {
          const sim::RankId r = g.add_rank(gpu(real(d), s, j), rank(d, s, j));
          g.host_process.push_back(process_of(d, s, j));
          add_mirrors(g, r, d, s, j);
        }
      }
    }
  }
  void add_ranks(sim::ExecutionGraph& g) const;
  /// (replica, stage, TP rank) of each simulated rank, in rank order (the replica it is, real(d)).
  template <typename Coords>
  std::vector<Coords> coords() const {
    std::vector<Coords> out;
    for (int d = 0; d < live_dp(); ++d) {
      for (int s = 0; s < pp_; ++s) {
        for (int j = 0; j < live_tp(); ++j) out.push_back(Coords{real(d), s, j});
      }
    }
    return out;
  }
  /// The data-parallel communicator of stage s's TP rank j (j < live_tp) over the simulated
  /// replicas, standing for every folded group.
  std::uint32_t add_dp_communicator(sim::ExecutionGraph& g, int s, int j) const;
  /// Hybrid sharding (plan.shard_group = `size` < dp): the sub-communicator of stage s's TP rank
  /// j (j < live_tp) that holds simulated replica d: its shard group (`shard`: replicas
  /// [k size, (k + 1) size)) or its replica group (replicas d mod size + multiples of size).
  std::uint32_t add_dp_subgroup(sim::ExecutionGraph& g, int s, int j, int d, int size, bool shard) const;
  /// The context-parallel group of simulated rank (d, s, j) (plan.cp > 1): replicas
  /// [k cp, (k + 1) cp) (Megatron's tp-cp-dp order, with the tp-dp-pp placement), standing for
  /// every folded group; each made once in `made`.
  std::uint32_t cp_communicator(sim::ExecutionGraph& g, int cp, int d, int s, int j,
                                std::map<std::tuple<int, int, int>, std::uint32_t>& made) const;
  /// The tensor-parallel communicator of replica d's stage s (d < live_dp).
  std::uint32_t add_tp_communicator(sim::ExecutionGraph& g, int d, int s) const;
  /// The embedding group of replica d's TP rank j (d < live_dp, j < live_tp): its first and
  /// last pipeline stages, which hold the word embedding and its tied copy (Megatron's
  /// embedding group, DeepSpeed's tied-weight group), standing for every folded pair.
  std::uint32_t add_embedding_communicator(sim::ExecutionGraph& g, int d, int j) const;

  /// Without a pipeline: each simulated rank's communicators, by graph rank. `dp` is its
  /// data-parallel group, or with hybrid sharding its shard group, whose replica group is
  /// `replica` (kNoReplicaGroup otherwise); `tp` its tensor-parallel group (tp > 1). Made in a
  /// fixed order: per TP rank the data-parallel groups, then per replica the TP group.
  struct RankCommunicators {
    std::vector<std::uint32_t> dp;
    std::vector<std::uint32_t> tp;
    std::vector<std::uint32_t> replica;
  };
  static constexpr std::uint32_t kNoReplicaGroup = 0xffffffffu;
  RankCommunicators add_data_parallel_communicators(sim::ExecutionGraph& g, const Plan& plan) const;

  /// For reports: "16 of 1024 ranks simulated (data-parallel replicas and tensor-parallel ranks
  /// folded)", or empty when nothing folds.
  std::string describe() const;

  /// Expert parallelism's part for simulated rank (d, s, j) (routing may be null: no MoE): its
  /// EP group (replicas [k ep, (k + 1) ep)) and its experts' data-parallel group (replicas
  /// with the same d mod ep), each communicator made once in `made`. With an expert TP e below
  /// tp an EP group is the TP ranks with j's rank mod e of replicas [k R, (k + 1) R), R = ep e /
  /// tp, the experts' data-parallel group the replicas with the same d mod R and TP rank, and
  /// (e > 1) the expert-TP group j's e consecutive TP ranks.
  MoeRank moe_rank(sim::ExecutionGraph& g, MoeRouting* routing, int d, int s, int j,
                   std::map<std::tuple<bool, int, int, int>, std::uint32_t>& made) const;

 private:
  void add_mirrors(sim::ExecutionGraph& g, sim::RankId r, int d, int s, int j) const;
  /// The EP group of replica d's stage s holding TP rank j under an expert TP below TP (moe_rank).
  std::uint32_t add_ep_across_tp(sim::ExecutionGraph& g, int s, int d, int j) const;
  /// The expert-TP group of TP rank j of replica d's stage s: its expert TP consecutive TP ranks.
  std::uint32_t add_etp_communicator(sim::ExecutionGraph& g, int s, int d, int j) const;

  int dp_ = 1;
  int pp_ = 1;
  int tp_ = 1;
  /// The simulated replica that stands for replica d.
  int represented_by(int d) const { return fold_dp_ ? class_of_[static_cast<std::size_t>(d)] : d; }
  /// Sets fold_dp_, live_ and class_of_ (the constructor, once the strides are known).
  void fold_replicas(const Plan& plan, const topo::Cluster& cluster, bool stage_groups);

  int ep_ = 1;
  int etp_ = 1;                ///< expert TP (plan.etp())
  bool ep_across_tp_ = false;  ///< expert TP below tp: an EP group spans TP ranks
  int ep_replicas_ = 1;        ///< replicas per EP group: ep, or ep x expert TP / tp across TP ranks
  int unit_ = 1;  ///< replicas simulated each when replicas fold: ep, or 1 when EP ranks are alike
  bool fold_dp_ = false;
  bool fold_tp_ = false;
  /// Replicas fold by placement (fold_replicas): live_ holds whole blocks, not the first unit_.
  bool by_placement_ = false;
  bool bounds_only_ = false;  ///< folded as if alike (plan.fold_as_alike) where they are not
  /// Folded replicas: the replica each simulated one is, and per replica the simulated one
  /// standing for it (empty unless fold_dp_).
  std::vector<int> live_;
  std::vector<int> class_of_;
  int stride_dp_ = 1;
  int stride_pp_ = 1;
  int stride_tp_ = 1;
};

}  // namespace foresight::strategy
