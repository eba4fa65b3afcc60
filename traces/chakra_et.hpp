#pragma once
/// MLCommons Chakra execution traces (ETs) as plain values, and their files: a per-rank ET file
/// (ASTRA-sim's PREFIX.RANK.et) is a GlobalMetadata message and the rank's nodes, each preceded
/// by its length as a varint (traces/chakra.proto holds the schema). Reading checks what the
/// format leaves open: a file of at most 4 GiB, messages of at most 64 MiB, every message
/// complete and free of fields the schema lacks (a file of a newer schema or not an ET at all is
/// a TraceError naming the file and the message, never a guess).

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

namespace foresight::trace {

/// Chakra's node types (their values are the schema's).
enum class ChakraNodeType : int {
  invalid = 0,
  metadata = 1,
  mem_load = 2,
  mem_store = 3,
  comp = 4,
  comm_send = 5,
  comm_recv = 6,
  comm_coll = 7,
};
std::string_view to_string(ChakraNodeType t);

/// Chakra's collective types (comm_type attribute; values are the schema's).
enum class ChakraCollective : int {
  all_reduce = 0,
  reduce = 1,
  all_gather = 2,
  gather = 3,
  scatter = 4,
  broadcast = 5,
  all_to_all = 6,
  reduce_scatter = 7,
  reduce_scatter_block = 8,
  barrier = 9,
};

/// An attribute's value: every integer type of the schema reads as int64 (uint64 beyond its range
/// is an error), float as double; lists likewise.
using ChakraValue = std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>, std::vector<double>,
                                 std::vector<bool>, std::vector<std::string>>;

struct ChakraAttr {
  std::string name;
  ChakraValue value;
};

struct ChakraNode {
  std::uint64_t id = 0;
  std::string name;
  ChakraNodeType type = ChakraNodeType::invalid;
  std::vector<std::uint64_t> ctrl_deps;
  std::vector<std::uint64_t> data_deps;
  std::uint64_t start_time_micros = 0;
  std::uint64_t duration_micros = 0;
  std::vector<ChakraAttr> attrs;

  /// The attribute named `name`, or null.
  const ChakraAttr* attr(std::string_view name) const;
};

/// One rank's ET.
struct ChakraTrace {
  std::string path;     ///< where it was read from (messages name it)
  std::string version;  ///< GlobalMetadata.version ("0.0.4")
  std::vector<ChakraAttr> metadata;
  std::vector<ChakraNode> nodes;

  const ChakraAttr* metadata_attr(std::string_view name) const;
};

/// Reads one per-rank ET file. TraceError naming the file (and the message's index) when it is not
/// a regular file, is too large, is truncated, or holds a message the schema does not describe.
ChakraTrace read_chakra_trace(const std::string& path);
/// Parses ET bytes (`origin` names them in errors).
ChakraTrace parse_chakra_trace(const std::string& bytes, const std::string& origin);
/// Writes `t` in the per-rank file format.
void write_chakra_trace(std::ostream& os, const ChakraTrace& t);

/// An integer attribute's value; TraceError naming `origin`, the node and the attribute when it
/// holds another type.
std::int64_t chakra_integer(const ChakraAttr& a, const std::string& origin, std::uint64_t node);

/// Whether `path` looks like a Chakra ET: a name ending in ".et", or a directory holding such
/// files.
bool is_chakra_path(const std::string& path);

/// The per-rank files of a Chakra workload, by rank: `path` is a directory (every PREFIX.N.et in
/// it, of one prefix), a prefix (PREFIX.0.et ... exist), or one PREFIX.N.et file (with its
/// siblings). TraceError when none is found, when ranks 0 .. N-1 are not all present, or when a
/// directory holds several prefixes.
std::vector<std::string> chakra_rank_files(const std::string& path);

}  // namespace foresight::trace
