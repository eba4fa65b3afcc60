#pragma once
/// Execution graphs to and from Chakra execution traces (traces/chakra_et.hpp), the per-rank
/// files ASTRA-sim consumes.
///
/// Export (to_chakra): one ET per rank of an unfolded graph. Its GPU kernels and host work are
/// COMP_NODEs (is_cpu_op for host work), its collectives COMM_COLL_NODEs (comm_type, comm_size in
/// NCCL's size convention, pg_name naming the communicator in the comm-group file that goes with
/// them: {"pg_name": [ranks in communicator order]}, ASTRA-sim's --comm-group-configuration), its
/// sends and receives COMM_SEND_NODE / COMM_RECV_NODE (comm_src, comm_dst, comm_tag, comm_size).
/// data_deps are the graph's dependencies; ctrl_deps add each op's predecessor on its stream, so
/// that a simulator without streams (ASTRA-sim) keeps their order. start_time_micros and
/// duration_micros are the simulated schedule. Attributes named "foresight.*" carry what Chakra's
/// schema has no field for (streams, dispatch and interpreter-lock time, picosecond durations,
/// the order of ranks sharing a host thread): other readers ignore them, and Foresight reads its
/// own ETs back into the graph they came from, node for node.
///
/// Import (chakra_graph): ETs of any producer. Without Foresight's attributes: a COMP_NODE takes
/// duration_micros, or, when that is 0 and it has num_ops / tensor_size, a roofline estimate on
/// the target GPU (the larger of num_ops at its peak tensor rate and tensor_size bytes at its HBM
/// bandwidth); is_cpu_op nodes run on the host thread; GPU kernels on a compute stream,
/// collectives on a communication stream, sends and receives on one each (ops of a stream run in
/// file order once their dependencies are done); dependencies are data_deps and ctrl_deps.
/// A collective's members are its pg_name's group in the comm-group file, or every rank without
/// pg_name. METADATA_NODEs become zero-length host markers; memory nodes are not supported.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exec/execution_graph.hpp"
#include "exec/executor.hpp"
#include "exec/op_signature.hpp"
#include "traces/chakra_et.hpp"

namespace foresight::trace {

/// Communicator groups by pg_name (ASTRA-sim's comm-group JSON: {"NAME": [rank, ...]}).
using ChakraGroups = std::map<std::string, std::vector<int>>;

/// Reads a comm-group file: an object of names to arrays of distinct ranks. ConfigError naming
/// the file and the key otherwise.
ChakraGroups read_chakra_groups(const std::string& path);
/// Parses comm-group JSON text; `origin` names it in messages.
ChakraGroups parse_chakra_groups(std::string_view text, const std::string& origin);
std::string chakra_groups_json(const ChakraGroups& groups);

/// What the export records besides the graph.
struct ChakraExportInfo {
  std::string producer;  ///< e.g. "foresight 0.1.0 simulate examples/x.json"
  std::string network;   ///< the network model the schedule came from ("analytical", "flow")
  double comm_compute_slowdown = 0.0;
  /// Per kernel family (sim::ExecutorOptions): recorded with each compute node's family.
  std::array<double, sim::kOpTypeCount> comm_compute_slowdown_by_type{};
  std::array<bool, sim::kOpTypeCount> comm_waits_for{};
  /// Per rank, where ranks' GPU models differ (sim::ExecutorOptions::*_by_rank): each rank's ET
  /// records its own. Empty: every rank records the two above.
  std::vector<std::array<double, sim::kOpTypeCount>> comm_compute_slowdown_by_rank;
  std::vector<std::array<bool, sim::kOpTypeCount>> comm_waits_for_by_rank;
  std::string cluster;   ///< the cluster it ran on: a preset name or a topology file
  int cluster_gpus = 0;  ///< the size the cluster was resolved with
};

struct ChakraExport {
  std::vector<ChakraTrace> ranks;
  ChakraGroups groups;
};

/// The ETs of `graph` with the schedule of `result`. ConfigError for a folded graph (export needs
/// every rank: compile with plan.fold false).
ChakraExport to_chakra(const sim::ExecutionGraph& graph, const sim::ExecutionResult& result,
                       const ChakraExportInfo& info);

struct ChakraImportOptions {
  const ChakraGroups* groups = nullptr;
  /// The target GPU's peak tensor rate (FLOP/s) and HBM bandwidth (B/s), for roofline estimates.
  double peak_flops = 0.0;
  double memory_bandwidth = 0.0;
};

struct ChakraGraph {
  sim::ExecutionGraph graph;
  bool foresight = false;     ///< written by Foresight (its attributes were read)
  std::string producer;       ///< the producer's metadata, when recorded
  std::string network;        ///< the network model of the recorded schedule, when recorded
  double comm_compute_slowdown = 0.0;
  /// Per kernel family, where recorded; the compute nodes carry signatures of their family alone.
  std::array<double, sim::kOpTypeCount> comm_compute_slowdown_by_type{};
  std::array<bool, sim::kOpTypeCount> comm_waits_for{};
  /// Per rank, where the ranks' ETs record different factors (a mixed cluster); empty otherwise.
  std::vector<std::array<double, sim::kOpTypeCount>> comm_compute_slowdown_by_rank;
  std::vector<std::array<bool, sim::kOpTypeCount>> comm_waits_for_by_rank;
  std::string cluster;        ///< the recorded cluster, when recorded
  int cluster_gpus = 0;
  /// The recorded schedule's length: the latest start + duration over the ranks, minus the
  /// earliest start (of nodes with a start or a duration, in ETs of other producers); nullopt
  /// when no node has either. replayed_span measures a replay the same way.
  std::optional<double> recorded_s;
  std::size_t compute = 0, host = 0, collectives = 0, transfers = 0, markers = 0;
  std::size_t roofline = 0;  ///< compute nodes timed by the roofline estimate
  /// Attributes no rule reads, by name, with how many nodes carry them (reported, not silently
  /// dropped).
  std::map<std::string, std::size_t> unused_attrs;
};

/// The graph of per-rank ETs (`ranks[i]` is rank i, on GPU i). TraceError naming the file and the
/// node for: a dependency on an id the rank lacks, a cycle, an unsupported node type, a
/// collective of unknown type or without comm_size, a pg_name missing from the groups, a send or
/// receive without its peer, or ranks disagreeing on a collective.
ChakraGraph chakra_graph(const std::vector<ChakraTrace>& ranks, const ChakraImportOptions& options = {});

/// The replayed schedule's length (seconds), measured as recorded_s is, in whole microseconds as
/// the ETs record times.
double replayed_span(const ChakraGraph& g, const sim::ExecutionResult& result);

}  // namespace foresight::trace
