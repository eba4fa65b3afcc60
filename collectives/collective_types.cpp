#include "collectives/collective_types.hpp"

#include <fmt/core.h>

#include <array>

#include "common/error.hpp"

namespace foresight::sim {
namespace {

constexpr std::array<std::string_view, kCollectiveOpCount> kOpNames{
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv"};
constexpr std::array<std::string_view, kAlgorithmCount> kAlgorithmNames{
    "tree", "ring", "nvls", "nvls_tree", "pat", "hierarchical", "direct"};
constexpr std::array<std::string_view, kProtocolCount> kProtocolNames{"LL", "LL128", "Simple"};

template <typename Enum, std::size_t N>
Enum parse_name(const std::array<std::string_view, N>& names, std::string_view text,
                std::string_view where, std::string_view what) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == text) return static_cast<Enum>(i);
  }
  std::string known;
  for (const auto n : names) known += (known.empty() ? "" : ", ") + std::string(n);
  throw ConfigError(fmt::format("{}: expected {} ({}), found \"{}\"", where, what, known, text));
}

}  // namespace

std::string_view to_string(CollectiveOp op) { return kOpNames.at(static_cast<std::size_t>(op)); }
std::string_view to_string(Algorithm a) { return kAlgorithmNames.at(static_cast<std::size_t>(a)); }
std::string_view to_string(Protocol p) { return kProtocolNames.at(static_cast<std::size_t>(p)); }

CollectiveOp parse_collective_op(std::string_view text, std::string_view where) {
  return parse_name<CollectiveOp>(kOpNames, text, where, "a collective operation");
}
Algorithm parse_algorithm(std::string_view text, std::string_view where) {
  return parse_name<Algorithm>(kAlgorithmNames, text, where, "a collective algorithm");
}
Protocol parse_protocol(std::string_view text, std::string_view where) {
  return parse_name<Protocol>(kProtocolNames, text, where, "an NCCL protocol");
}

double bus_bandwidth_factor(CollectiveOp op, int ranks) {
  const double n = ranks;
  switch (op) {
    case CollectiveOp::all_reduce:
      return 2.0 * (n - 1.0) / n;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter:
    case CollectiveOp::all_to_all:
      return (n - 1.0) / n;
    case CollectiveOp::broadcast:
    case CollectiveOp::reduce:
    case CollectiveOp::send_recv:
      return 1.0;
  }
  return 1.0;
}

}  // namespace foresight::sim
