// Execution graphs to Chakra ETs (traces/chakra_graph.hpp, "Export").
#include <fmt/core.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.hpp"
#include "traces/chakra_conventions.hpp"
#include "traces/chakra_graph.hpp"

namespace foresight::trace {
using sim::ConfigError;
using sim::Node;
using sim::OpKind;
using namespace chakra_detail;

ChakraExport to_chakra(const sim::ExecutionGraph& g, const sim::ExecutionResult& result, const ChakraExportInfo& info) {
  if (!g.runs.empty()) throw sim::InternalError("chakra export: the graph's kernels are coalesced: compile it without coalescing");
  if (!g.rank_mirrors.empty()) {
    for (const auto& m : g.rank_mirrors) {
      if (!m.empty()) throw ConfigError("chakra export: the graph is folded (one rank stands for several): compile it with plan.fold false");
    }
  }
  for (const sim::Communicator& c : g.communicators) {
    if (c.groups.size() > 1) throw ConfigError("chakra export: the graph is folded (a communicator stands for several groups): compile it with plan.fold false");
  }
  ChakraExport out;
  const std::size_t n_ranks = g.ranks();
  out.ranks.resize(n_ranks);
  std::vector<std::string> stream_names;
  for (const auto& [id, name] : g.stream_names) stream_names.push_back(fmt::format("{}={}", id, name));
  for (std::size_t r = 0; r < n_ranks; ++r) {
    ChakraTrace& t = out.ranks[r];
    t.version = "0.0.4";
    t.metadata = {{"producer", fmt::format("{} {}", kProducer, info.producer)},
                  {"foresight.rank", static_cast<std::int64_t>(r)},
                  {"foresight.ranks", static_cast<std::int64_t>(n_ranks)},
                  {"foresight.gpu", static_cast<std::int64_t>(g.rank_gpu[r])},
                  {"foresight.host", static_cast<std::int64_t>(g.rank_host[r])},
                  {"foresight.network", info.network},
                  {"foresight.comm_compute_slowdown", info.comm_compute_slowdown},
                  {"foresight.cluster", info.cluster},
                  {"foresight.cluster_gpus", static_cast<std::int64_t>(info.cluster_gpus)},
                  {"foresight.stream_names", stream_names}};
    if (!g.host_process.empty()) t.metadata.push_back({"foresight.process", static_cast<std::int64_t>(g.host_process[g.rank_host[r]])});
    const auto& slow = info.comm_compute_slowdown_by_rank.empty() ? info.comm_compute_slowdown_by_type
                                                                   : info.comm_compute_slowdown_by_rank.at(r);
    const auto& waits = info.comm_waits_for_by_rank.empty() ? info.comm_waits_for : info.comm_waits_for_by_rank.at(r);
    for (int k = 0; k < sim::kOpTypeCount; ++k) {
      if (const double f = slow[static_cast<std::size_t>(k)]; f > 0.0) {
        t.metadata.push_back({comm_slowdown_key(static_cast<sim::OpType>(k)), f});
      }
      if (waits[static_cast<std::size_t>(k)]) {
        t.metadata.push_back({comm_waits_key(static_cast<sim::OpType>(k)), true});
      }
    }
  }
  for (std::size_t k = 0; k < g.communicators.size(); ++k) {
    std::vector<int> members;
    for (const sim::RankId m : g.communicators[k].ranks) members.push_back(static_cast<int>(m));
    out.groups.emplace(std::to_string(k), std::move(members));
  }
  std::vector<std::uint64_t> local(g.nodes.size());
  std::vector<std::uint64_t> count(n_ranks, 0);
  std::map<std::pair<sim::RankId, sim::StreamId>, std::uint64_t> last_on_stream;
  std::vector<std::set<std::uint32_t>> matrices_used(n_ranks);
  // Compute nodes name their kernel family where a family's slowdown is recorded.
  const auto any_slow = [](const std::array<double, sim::kOpTypeCount>& a) {
    return std::any_of(a.begin(), a.end(), [](double f) { return f > 0.0; });
  };
  const auto any_wait = [](const std::array<bool, sim::kOpTypeCount>& a) {
    return std::any_of(a.begin(), a.end(), [](bool w) { return w; });
  };
  const bool by_family = any_slow(info.comm_compute_slowdown_by_type) || any_wait(info.comm_waits_for) ||
                         std::any_of(info.comm_compute_slowdown_by_rank.begin(), info.comm_compute_slowdown_by_rank.end(), any_slow) ||
                         std::any_of(info.comm_waits_for_by_rank.begin(), info.comm_waits_for_by_rank.end(), any_wait);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    local[i] = count[n.rank]++;
    ChakraNode c;
    c.id = local[i];
    c.name = g.names[n.name];
    c.start_time_micros = micros(result.start[i]);
    c.duration_micros = micros(result.end[i]) - std::min(micros(result.end[i]), micros(result.start[i]));
    for (const sim::NodeId d : n.deps) {
      if (g.nodes[d].rank == n.rank) c.data_deps.push_back(local[d]);
    }
    std::vector<std::int64_t> remote;
    for (const sim::NodeId d : n.deps) {
      if (g.nodes[d].rank == n.rank) continue;
      remote.push_back(static_cast<std::int64_t>(g.nodes[d].rank));
      remote.push_back(static_cast<std::int64_t>(local[d]));
    }
    const auto key = std::make_pair(n.rank, n.stream);
    if (const auto it = last_on_stream.find(key); it != last_on_stream.end()) {
      if (std::find(c.data_deps.begin(), c.data_deps.end(), it->second) == c.data_deps.end()) c.ctrl_deps.push_back(it->second);
    }
    last_on_stream[key] = local[i];
    auto& at = c.attrs;
    at.push_back({"is_cpu_op", n.stream == sim::kHostStream || n.kind == OpKind::host});
    switch (n.kind) {
      case OpKind::compute:
      case OpKind::host:
      case OpKind::sync: c.type = ChakraNodeType::comp; break;
      case OpKind::collective: {
        c.type = ChakraNodeType::comm_coll;
        const auto op = to_chakra_op(n.op);
        if (!op) throw ConfigError(fmt::format("chakra export: node {}: a {} collective has no Chakra type", i, sim::to_string(n.op)));
        const double members = static_cast<double>(g.communicators[n.communicator].ranks.size());
        at.push_back({"comm_type", static_cast<std::int64_t>(*op)});
        at.push_back({"comm_size", static_cast<std::int64_t>(std::llround(per_rank_size(n.op) ? n.bytes / members : n.bytes))});
        at.push_back({"pg_name", std::to_string(n.communicator)});
        if (n.root != 0) at.push_back({"foresight.root", static_cast<std::int64_t>(n.root)});
        if (n.matrix != sim::kNoMatrix) {
          at.push_back({"foresight.matrix", static_cast<std::int64_t>(n.matrix)});
          matrices_used[n.rank].insert(n.matrix);
        }
        break;
      }
      case OpKind::send:
      case OpKind::recv: {
        const bool send = n.kind == OpKind::send;
        c.type = send ? ChakraNodeType::comm_send : ChakraNodeType::comm_recv;
        at.push_back({"comm_src", static_cast<std::int64_t>(send ? n.rank : n.peer)});
        at.push_back({"comm_dst", static_cast<std::int64_t>(send ? n.peer : n.rank)});
        at.push_back({"comm_tag", static_cast<std::int64_t>(n.tag)});
        at.push_back({"comm_size", static_cast<std::int64_t>(std::llround(n.bytes))});
        break;
      }
    }
    at.push_back({"foresight.order", static_cast<std::int64_t>(i)});
    at.push_back({"foresight.kind", std::string(sim::to_string(n.kind))});
    at.push_back({"foresight.stream", static_cast<std::int64_t>(n.stream)});
    if (n.duration != sim::Time::zero()) at.push_back({"foresight.duration_ps", n.duration.ps()});
    if (n.dispatch != sim::Time::zero()) at.push_back({"foresight.dispatch_ps", n.dispatch.ps()});
    if (n.gil != sim::Time::zero()) at.push_back({"foresight.gil_ps", n.gil.ps()});
    if (n.bytes != 0.0) at.push_back({"foresight.bytes", n.bytes});
    if (n.phase != sim::Phase::none) at.push_back({"foresight.phase", std::string(sim::to_string(n.phase))});
    if (n.layer >= 0) at.push_back({"foresight.layer", static_cast<std::int64_t>(n.layer)});
    if (n.micro_batch >= 0) at.push_back({"foresight.micro_batch", static_cast<std::int64_t>(n.micro_batch)});
    if (n.algorithm) at.push_back({"foresight.algorithm", std::string(sim::to_string(*n.algorithm))});
    if (by_family && n.kind == OpKind::compute && n.signature != sim::kNoSignature) {
      at.push_back({"foresight.kernel_family", std::string(sim::to_string(g.signatures[n.signature].type))});
    }
    if (!remote.empty()) at.push_back({"foresight.remote_deps", remote});
    out.ranks[n.rank].nodes.push_back(std::move(c));
  }
  for (std::size_t r = 0; r < n_ranks; ++r) {
    for (const std::uint32_t k : matrices_used[r]) {
      out.ranks[r].metadata.push_back({fmt::format("foresight.send_matrix.{}", k), g.send_matrices[k]});
    }
  }
  return out;
}


}  // namespace foresight::trace
