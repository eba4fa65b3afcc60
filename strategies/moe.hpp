#pragma once
/// Mixture-of-Experts: the router and routed-expert layers, and where tokens go.
///
/// Routing decides, for each MoE layer and micro-batch, how many tokens each EP rank sends to
/// each expert. Each EP rank routes its own micro-batch's tokens x top_k assignments over the
/// experts by a distribution:
/// - balanced: every expert the same share (what a well-trained load-balancing loss aims at);
/// - zipf: expert popularity ∝ 1 / rank^s over a permutation of the experts drawn per layer;
/// - histogram: measured per-expert shares from a file (one list, or one per MoE layer).
/// Counts are drawn multinomially from a seeded generator (SplitMix64, portable), so runs are
/// deterministic; with `expected` the counts are the rounded expectations instead. Experts
/// beyond their capacity (capacity_factor x tokens x top_k / experts per EP group) drop the
/// excess, as GShard and Switch do; dropless routing keeps everything.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "exec/execution_graph.hpp"
#include "models/model.hpp"

namespace foresight::strategy {

struct RoutingSpec {
  enum class Kind : std::uint8_t { balanced, zipf, histogram };
  Kind kind = Kind::balanced;
  double zipf_s = 1.0;
  /// histogram: per-expert shares; one row for every MoE layer, or one row per MoE layer.
  std::vector<std::vector<double>> histogram;
  std::string histogram_file;  ///< where the histogram came from (reports)
  std::uint64_t seed = 1;
  bool expected = false;  ///< counts are the rounded expectations, no draw
};
std::string_view to_string(RoutingSpec::Kind k);

/// Tokens of one MoE layer and micro-batch: count[r][x] = tokens EP rank r sends to expert x
/// (after capacity drops).
struct RoutingTable {
  std::vector<std::vector<double>> count;
  double dropped = 0.0;  ///< assignments dropped by capacity
  /// Tokens expert x receives from all ranks.
  double expert_tokens(int x) const;
};

class MoeRouting {
 public:
  /// `tokens`: tokens per micro-batch on one rank; ep ranks each hold experts / ep experts.
  MoeRouting(const Model& model, RoutingSpec spec, int ep, double tokens);
  /// The table of MoE layer `layer` (a Model::layers index of an experts layer) for micro-batch
  /// `micro`: the same for every step and every EP group, so identical groups stay identical.
  const RoutingTable& table(std::size_t layer, int micro);
  int ep() const { return ep_; }
  /// The graph's index of the all-to-allv matrix of (layer, micro-batch, direction), added to
  /// `g` from `matrix` the first time a rank asks, so every EP member names the same one.
  std::uint32_t matrix(sim::ExecutionGraph& g, std::size_t layer, int micro, bool to_experts, std::vector<double> matrix);
  int experts_per_rank(std::size_t layer) const;
  /// Every EP rank runs the same expert kernels in every MoE layer and micro-batch: each of its
  /// i-th local experts gets as many tokens as every other rank's, and each rank sends as many.
  /// Only deterministic routing can promise it for every micro-batch (balanced, or expected
  /// counts); then one EP rank may stand for all (strategies/hybrid_layout.hpp).
  bool ranks_alike();

 private:
  const Model& model_;
  RoutingSpec spec_;
  int ep_;
  double tokens_;
  std::map<std::pair<std::size_t, int>, RoutingTable> cache_;
  std::map<std::tuple<std::size_t, int, bool>, std::uint32_t> matrices_;
  std::map<std::vector<double>, std::uint32_t> by_content_;  ///< matrix -> its index in the graph
};

/// A rank's part in expert parallelism.
struct MoeRank {
  MoeRouting* routing = nullptr;  ///< shared by the ranks of one compile
  std::uint32_t ep_comm = 0;      ///< the EP group
  int ep_rank = 0;
  std::uint32_t expert_dp_comm = 0;  ///< the replicas holding the same experts
  bool expert_dp = false;            ///< that group has more than one member
  /// The expert-TP group, where experts split over part of the TP group (1 < expert TP < tp);
  /// otherwise kNoGroup (the TP group, or none).
  std::uint32_t etp_comm = kNoGroup;
  static constexpr std::uint32_t kNoGroup = 0xffffffffu;
};

struct Plan;
/// The routing of `model` under `plan` (plan.routing over plan.ep ranks, micro_batch x seq_len
/// tokens per rank and micro-batch), or nullopt for a model without routed experts.
std::optional<MoeRouting> moe_routing(const Model& model, const Plan& plan);

/// ModelError unless the routing spec fits the model: histogram rows of `experts` shares, one
/// row or one per MoE layer.
void check_routing(const RoutingSpec& spec, const Model& model);

}  // namespace foresight::strategy
