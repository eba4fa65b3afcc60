#pragma once
/// Names shared by the NCCL tuner, the collective engine, the execution graph and the CLI:
/// collective operations, algorithms and protocols.

#include <cstdint>
#include <string_view>

namespace foresight::sim {

/// Collective operations. Sizes follow NCCL and nccl-tests: all_reduce, broadcast and reduce
/// move a buffer of S bytes; all_gather and reduce_scatter name the TOTAL (gathered) size S =
/// n x per-rank size; all_to_all names the per-rank send buffer S = n x per-peer size.
enum class CollectiveOp : std::uint8_t {
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  reduce,
  all_to_all,
  send_recv,
};
inline constexpr int kCollectiveOpCount = 7;

/// Algorithms. ring, tree, nvls, nvls_tree and pat are NCCL's; hierarchical (intra-node
/// reduce-scatter, inter-node all-reduce, intra-node all-gather) is Horovod's and never chosen
/// automatically; direct is grouped point-to-point (all_to_all, send_recv).
enum class Algorithm : std::uint8_t { tree, ring, nvls, nvls_tree, pat, hierarchical, direct };
inline constexpr int kAlgorithmCount = 7;

/// NCCL protocols: LL (8-byte stores with a 4-byte flag), LL128 (120 data bytes per 128-byte
/// line), Simple (bulk copies with fences).
enum class Protocol : std::uint8_t { ll, ll128, simple };
inline constexpr int kProtocolCount = 3;

std::string_view to_string(CollectiveOp op);
std::string_view to_string(Algorithm a);
std::string_view to_string(Protocol p);

/// Parsers for the names above (as printed by to_string); ConfigError naming `where` otherwise.
CollectiveOp parse_collective_op(std::string_view text, std::string_view where);
Algorithm parse_algorithm(std::string_view text, std::string_view where);
Protocol parse_protocol(std::string_view text, std::string_view where);

/// nccl-tests' bus-bandwidth factor: busbw = algbw x factor (all_reduce 2(n-1)/n; all_gather,
/// reduce_scatter and all_to_all (n-1)/n; the others 1). nccl-tests src/*.cu GetBw.
double bus_bandwidth_factor(CollectiveOp op, int ranks);

}  // namespace foresight::sim
