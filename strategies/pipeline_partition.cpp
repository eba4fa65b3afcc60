// Cutting a model into pipeline chunks: the units that may be cut between, the modelled time
// of each layer, and the partitions by time, parameters, blocks or an explicit list.
#include <fmt/core.h>

#include <algorithm>
#include <limits>

#include "common/error.hpp"
#include "strategies/pipeline.hpp"
#include "strategies/rank_emitter.hpp"

namespace foresight::strategy {
namespace {

/// Contiguous split of `cost` into `k` non-empty groups minimizing the largest group's sum
/// (optimal, by dynamic programming); returns the group sizes.
std::vector<std::size_t> min_max_split(const std::vector<double>& cost, std::size_t k) {
  const std::size_t n = cost.size();
  std::vector<double> prefix(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + cost[i];
  constexpr double inf = std::numeric_limits<double>::infinity();
  // best[j][i]: the smallest largest-group sum splitting the first i units into j groups.
  std::vector<std::vector<double>> best(k + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<std::size_t>> cut(k + 1, std::vector<std::size_t>(n + 1, 0));
  best[0][0] = 0.0;
  for (std::size_t j = 1; j <= k; ++j) {
    for (std::size_t i = j; i <= n; ++i) {
      for (std::size_t c = j - 1; c < i; ++c) {
        const double v = std::max(best[j - 1][c], prefix[i] - prefix[c]);
        if (v < best[j][i]) {  // strict: ties keep the earliest cut, deterministically
          best[j][i] = v;
          cut[j][i] = c;
        }
      }
    }
  }
  std::vector<std::size_t> sizes(k);
  std::size_t i = n;
  for (std::size_t j = k; j > 0; --j) {
    sizes[j - 1] = i - cut[j][i];
    i = cut[j][i];
  }
  return sizes;
}

}  // namespace

std::vector<PartitionUnit> partition_units(const Model& model) {
  std::vector<PartitionUnit> units;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const int b = model.layers[i].block;
    if (b >= 0 && !units.empty() && units.back().block && model.layers[units.back().first].block == b) {
      units.back().last = i + 1;
    } else {
      units.push_back({i, i + 1, b >= 0});
    }
  }
  return units;
}

double layer_seconds(const Model& model, std::size_t i, const Plan& plan, const ComputeModel& compute, int cc) {
  double t = 0.0;
  for (const OpTemplate& op : model.layers[i].fwd) {
    t += std::max(compute.duration(instantiate(op, plan.micro_batch, plan, cc)).seconds(), plan.dispatch_forward.seconds());
  }
  for (const OpTemplate& op : model.layers[i].bwd) {
    t += std::max(compute.duration(instantiate(op, plan.micro_batch, plan, cc)).seconds(), plan.dispatch_backward.seconds());
  }
  return t;
}

std::vector<PipelineChunk> partition_model(const Model& model, const Plan& plan, const ComputeModel& compute, int cc) {
  const auto units = partition_units(model);
  const std::size_t k = static_cast<std::size_t>(plan.pp) * static_cast<std::size_t>(plan.virtual_stages);
  if (k > units.size()) {
    throw sim::ConfigError(fmt::format(
        "/plan/pp: pp x virtual_stages = {} x {} = {} model chunks, but {} has only {} units (blocks, and layers "
        "outside blocks) to split",
        plan.pp, plan.virtual_stages, k, model.name, units.size()));
  }
  std::vector<double> seconds(units.size(), 0.0);
  std::vector<double> params(units.size(), 0.0);
  for (std::size_t u = 0; u < units.size(); ++u) {
    for (std::size_t i = units[u].first; i < units[u].last; ++i) {
      seconds[u] += layer_seconds(model, i, plan, compute, cc);
      // A tied weight's copy counts where it is used: with pp > 1 the word embedding runs
      // elsewhere (DeepSpeed's 'parameters' partition counts a TiedLayerSpec on both stages).
      params[u] += static_cast<double>(model.layers[i].params) +
                   (k > 1 ? static_cast<double>(model.layers[i].tied_params) : 0.0);
    }
  }
  std::vector<std::size_t> sizes;
  switch (plan.partition) {
    case PartitionMode::time:
      sizes = min_max_split(seconds, k);
      break;
    case PartitionMode::params:
      sizes = min_max_split(params, k);
      break;
    case PartitionMode::uniform: {
      // Blocks are the repeated units; a model without blocks counts every unit as one.
      const bool has_blocks = std::any_of(units.begin(), units.end(), [](const auto& u) { return u.block; });
      const auto blocks = has_blocks ? static_cast<std::size_t>(std::count_if(units.begin(), units.end(),
                                                                              [](const auto& u) { return u.block; }))
                                     : units.size();
      // DeepSpeed's type:transformer (partition_balanced on one per block, runtime/utils.py) fills
      // each stage with ceil(blocks / pp) blocks in turn, the last taking what is left; Megatron
      // needs equal stages.
      const bool greedy = plan.pipeline_engine == PipelineEngine::deepspeed;
      if (!greedy && blocks % static_cast<std::size_t>(plan.pp) != 0) {
        throw sim::ConfigError(fmt::format("/plan/pp: the {} blocks of {} are not divisible by pp = {}", blocks,
                                           model.name, plan.pp));
      }
      const std::size_t per_stage = blocks / static_cast<std::size_t>(plan.pp);
      if (!greedy && per_stage % static_cast<std::size_t>(plan.virtual_stages) != 0) {
        throw sim::ConfigError(fmt::format(
            "/plan/virtual_stages: {} blocks per stage ({} blocks / pp {}) are not divisible by {} virtual stages",
            per_stage, blocks, plan.pp, plan.virtual_stages));
      }
      const std::size_t per_chunk = greedy ? (blocks + k - 1) / k : blocks / k;
      sizes.assign(k, 0);
      std::size_t seen = 0;
      for (const PartitionUnit& u : units) {
        const bool counts = u.block || !has_blocks;
        // A non-block unit joins the chunk of the block before it (the first chunk when none).
        const std::size_t chunk = counts ? seen / per_chunk : (seen == 0 ? 0 : (seen - 1) / per_chunk);
        ++sizes[std::min(k - 1, chunk)];
        if (counts) ++seen;
      }
      if (std::find(sizes.begin(), sizes.end(), std::size_t{0}) != sizes.end()) {
        throw sim::ConfigError(fmt::format("/plan/pp: {} cannot be split into {} chunks of whole blocks", model.name, k));
      }
      break;
    }
    case PartitionMode::explicit_units: {
      std::size_t sum = 0;
      for (const int n : plan.partition_units) sum += static_cast<std::size_t>(n);
      if (plan.partition_units.size() != k || sum != units.size()) {
        throw sim::ConfigError(fmt::format(
            "/plan/partition: expected {} counts (pp x virtual_stages) summing to the {} units of {}, found {} "
            "summing to {}",
            k, units.size(), model.name, plan.partition_units.size(), sum));
      }
      for (const int n : plan.partition_units) sizes.push_back(static_cast<std::size_t>(n));
      break;
    }
  }
  std::vector<PipelineChunk> chunks;
  std::size_t u = 0;
  for (const std::size_t n : sizes) {
    PipelineChunk c;
    c.first = units[u].first;
    c.last = units[u + n - 1].last;
    c.units = n;
    for (std::size_t j = u; j < u + n; ++j) {
      c.seconds += seconds[j];
      c.params += static_cast<std::int64_t>(params[j]);
    }
    chunks.push_back(c);
    u += n;
  }
  return chunks;
}

}  // namespace foresight::strategy
