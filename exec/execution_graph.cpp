#include "exec/execution_graph.hpp"

#include <fmt/core.h>

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

std::uint32_t ExecutionGraph::intern(const std::string& name) {
  const auto it = name_index.find(name);
  if (it != name_index.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(names.size());
  names.push_back(name);
  name_index.emplace(name, id);
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

NodeId ExecutionGraph::add(Node node) {
  if (nodes.size() >= kMaxNodes) {
    throw ConfigError(fmt::format(
        "the execution graph passed {} M nodes (about {:.0f} GB with its results), the most one "
        "simulation may hold: simulate fewer steps or micro-batches (a smaller global batch or a larger "
        "micro-batch)",
        kMaxNodes / 1'000'000, kMaxNodes * 150.0 / 1e9));
  }
  nodes.push_back(std::move(node));
  return static_cast<NodeId>(nodes.size() - 1);
}

}  // namespace foresight::sim
