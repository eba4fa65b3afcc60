#pragma once
// Conventions shared by the Chakra export and import (traces/chakra_graph.hpp): the producer
// name that marks Foresight's own ETs, collective types both ways, and Chakra's size and time units.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "collectives/collective_types.hpp"
#include "common/units.hpp"
#include "exec/op_signature.hpp"
#include "traces/chakra_et.hpp"

namespace foresight::trace::chakra_detail {

using sim::CollectiveOp;

constexpr std::string_view kProducer = "foresight";

/// The metadata key of a kernel family's slowdown while its rank communicates.
inline std::string comm_slowdown_key(sim::OpType t) {
  return "foresight.comm_compute_slowdown." + std::string(sim::to_string(t));
}
/// The metadata key marking a kernel family whose running kernels a collective waits for.
inline std::string comm_waits_key(sim::OpType t) { return "foresight.comm_waits_for." + std::string(sim::to_string(t)); }

inline std::optional<ChakraCollective> to_chakra_op(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_reduce: return ChakraCollective::all_reduce;
    case CollectiveOp::all_gather: return ChakraCollective::all_gather;
    case CollectiveOp::reduce_scatter: return ChakraCollective::reduce_scatter;
    case CollectiveOp::broadcast: return ChakraCollective::broadcast;
    case CollectiveOp::reduce: return ChakraCollective::reduce;
    case CollectiveOp::all_to_all: return ChakraCollective::all_to_all;
    case CollectiveOp::send_recv: return std::nullopt;
  }
  return std::nullopt;
}

inline std::optional<CollectiveOp> from_chakra_op(std::int64_t t) {
  switch (static_cast<ChakraCollective>(t)) {
    case ChakraCollective::all_reduce: return CollectiveOp::all_reduce;
    case ChakraCollective::all_gather: return CollectiveOp::all_gather;
    case ChakraCollective::reduce_scatter:
    case ChakraCollective::reduce_scatter_block: return CollectiveOp::reduce_scatter;
    case ChakraCollective::broadcast: return CollectiveOp::broadcast;
    case ChakraCollective::reduce: return CollectiveOp::reduce;
    case ChakraCollective::all_to_all: return CollectiveOp::all_to_all;
    default: return std::nullopt;  // gather, scatter, barrier: NCCL has no such collective
  }
}

/// Chakra's comm_size for all-gather and reduce-scatter is one rank's part (the converters take
/// the per-rank tensor); the graph's bytes are NCCL's whole buffer.
inline bool per_rank_size(CollectiveOp op) { return op == CollectiveOp::all_gather || op == CollectiveOp::reduce_scatter; }

inline std::uint64_t micros(sim::Time t) { return static_cast<std::uint64_t>(std::llround(std::max(0.0, t.microseconds()))); }

}  // namespace foresight::trace::chakra_detail
