#include "traces/chakra_et.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>

#include "common/error.hpp"

// The generated code is not ours to keep warning-free.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "traces/chakra.pb.h"
#pragma GCC diagnostic pop

namespace foresight::trace {
using sim::ConfigError;
using sim::InternalError;
using sim::TraceError;
namespace pb = foresight::chakra;
namespace {

constexpr std::uint64_t kMaxFileBytes = 4ULL << 30;
constexpr std::uint64_t kMaxMessageBytes = 64ULL << 20;

/// Whether `m` or any message inside it holds fields the schema does not describe.
bool has_unknown_fields(const google::protobuf::Message& m) {
  const google::protobuf::Reflection* r = m.GetReflection();
  if (!r->GetUnknownFields(m).empty()) return true;
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const auto* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(m, f); ++i) {
        if (has_unknown_fields(r->GetRepeatedMessage(m, f, i))) return true;
      }
    } else if (has_unknown_fields(r->GetMessage(m, f))) {
      return true;
    }
  }
  return false;
}

std::int64_t from_unsigned(std::uint64_t v, const std::string& where) {
  if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    throw TraceError(fmt::format("{}: expected an integer up to 2^63 - 1, found {}", where, v));
  }
  return static_cast<std::int64_t>(v);
}

template <typename List, typename Out, typename F>
std::vector<Out> list_of(const List& l, F f) {
  std::vector<Out> out;
  out.reserve(static_cast<std::size_t>(l.values_size()));
  for (const auto& v : l.values()) out.push_back(f(v));
  return out;
}

ChakraAttr from_proto(const pb::AttributeProto& a, const std::string& where) {
  using V = pb::AttributeProto;
  const std::string at = fmt::format("{}, attribute \"{}\"", where, a.name());
  const auto same = [](auto v) { return static_cast<std::int64_t>(v); };
  const auto wide = [&](std::uint64_t v) { return from_unsigned(v, at); };
  ChakraAttr out{a.name(), std::int64_t{0}};
  switch (a.value_case()) {
    case V::kDoubleVal: out.value = a.double_val(); break;
    case V::kFloatVal: out.value = static_cast<double>(a.float_val()); break;
    case V::kInt32Val: out.value = same(a.int32_val()); break;
    case V::kInt64Val: out.value = same(a.int64_val()); break;
    case V::kUint32Val: out.value = same(a.uint32_val()); break;
    case V::kUint64Val: out.value = wide(a.uint64_val()); break;
    case V::kSint32Val: out.value = same(a.sint32_val()); break;
    case V::kSint64Val: out.value = same(a.sint64_val()); break;
    case V::kFixed32Val: out.value = same(a.fixed32_val()); break;
    case V::kFixed64Val: out.value = wide(a.fixed64_val()); break;
    case V::kSfixed32Val: out.value = same(a.sfixed32_val()); break;
    case V::kSfixed64Val: out.value = same(a.sfixed64_val()); break;
    case V::kBoolVal: out.value = a.bool_val(); break;
    case V::kStringVal: out.value = a.string_val(); break;
    case V::kBytesVal: out.value = a.bytes_val(); break;
    case V::kDoubleList: out.value = list_of<pb::DoubleList, double>(a.double_list(), [](double v) { return v; }); break;
    case V::kFloatList:
      out.value = list_of<pb::FloatList, double>(a.float_list(), [](float v) { return static_cast<double>(v); });
      break;
    case V::kInt32List: out.value = list_of<pb::Int32List, std::int64_t>(a.int32_list(), same); break;
    case V::kInt64List: out.value = list_of<pb::Int64List, std::int64_t>(a.int64_list(), same); break;
    case V::kUint32List: out.value = list_of<pb::Uint32List, std::int64_t>(a.uint32_list(), same); break;
    case V::kUint64List: out.value = list_of<pb::Uint64List, std::int64_t>(a.uint64_list(), wide); break;
    case V::kSint32List: out.value = list_of<pb::Sint32List, std::int64_t>(a.sint32_list(), same); break;
    case V::kSint64List: out.value = list_of<pb::Sint64List, std::int64_t>(a.sint64_list(), same); break;
    case V::kFixed32List: out.value = list_of<pb::Fixed32List, std::int64_t>(a.fixed32_list(), same); break;
    case V::kFixed64List: out.value = list_of<pb::Fixed64List, std::int64_t>(a.fixed64_list(), wide); break;
    case V::kSfixed32List: out.value = list_of<pb::Sfixed32List, std::int64_t>(a.sfixed32_list(), same); break;
    case V::kSfixed64List: out.value = list_of<pb::Sfixed64List, std::int64_t>(a.sfixed64_list(), same); break;
    case V::kBoolList: out.value = list_of<pb::BoolList, bool>(a.bool_list(), [](bool v) { return v; }); break;
    case V::kStringList:
      out.value = list_of<pb::StringList, std::string>(a.string_list(), [](const std::string& v) { return v; });
      break;
    case V::kBytesList:
      out.value = list_of<pb::BytesList, std::string>(a.bytes_list(), [](const std::string& v) { return v; });
      break;
    case V::VALUE_NOT_SET: throw TraceError(fmt::format("{}: expected a value, found none", at));
  }
  return out;
}

void to_proto(const ChakraAttr& a, pb::AttributeProto& out) {
  out.set_name(a.name);
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::int64_t>) {
          out.set_int64_val(v);
        } else if constexpr (std::is_same_v<T, double>) {
          out.set_double_val(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          out.set_bool_val(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          out.set_string_val(v);
        } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
          for (const std::int64_t x : v) out.mutable_int64_list()->add_values(x);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          for (const double x : v) out.mutable_double_list()->add_values(x);
        } else if constexpr (std::is_same_v<T, std::vector<bool>>) {
          for (const bool x : v) out.mutable_bool_list()->add_values(x);
        } else {
          for (const std::string& x : v) out.mutable_string_list()->add_values(x);
        }
      },
      a.value);
}

/// Reads a varint at `pos` of `bytes`; false when the bytes end first or it runs past 10 bytes.
bool read_varint(const std::string& bytes, std::size_t& pos, std::uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64 && pos < bytes.size(); shift += 7) {
    const auto b = static_cast<unsigned char>(bytes[pos++]);
    value |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

void write_delimited(std::ostream& os, const google::protobuf::Message& m) {
  std::string body;
  if (!m.SerializeToString(&body)) throw InternalError("chakra: a message could not be serialized");
  std::uint64_t n = body.size();
  char buf[10];
  int len = 0;
  do {
    buf[len] = static_cast<char>(n & 0x7f);
    n >>= 7;
    if (n != 0) buf[len] = static_cast<char>(buf[len] | 0x80);
    ++len;
  } while (n != 0);
  os.write(buf, len);
  os.write(body.data(), static_cast<std::streamsize>(body.size()));
}

const ChakraAttr* find_attr(const std::vector<ChakraAttr>& attrs, std::string_view name) {
  const auto it = std::find_if(attrs.begin(), attrs.end(), [&](const ChakraAttr& a) { return a.name == name; });
  return it == attrs.end() ? nullptr : &*it;
}

}  // namespace

std::string_view to_string(ChakraNodeType t) {
  switch (t) {
    case ChakraNodeType::invalid: return "INVALID_NODE";
    case ChakraNodeType::metadata: return "METADATA_NODE";
    case ChakraNodeType::mem_load: return "MEM_LOAD_NODE";
    case ChakraNodeType::mem_store: return "MEM_STORE_NODE";
    case ChakraNodeType::comp: return "COMP_NODE";
    case ChakraNodeType::comm_send: return "COMM_SEND_NODE";
    case ChakraNodeType::comm_recv: return "COMM_RECV_NODE";
    case ChakraNodeType::comm_coll: return "COMM_COLL_NODE";
  }
  return "?";
}

const ChakraAttr* ChakraNode::attr(std::string_view name) const { return find_attr(attrs, name); }
const ChakraAttr* ChakraTrace::metadata_attr(std::string_view name) const { return find_attr(metadata, name); }

std::int64_t chakra_integer(const ChakraAttr& a, const std::string& origin, std::uint64_t node) {
  if (const auto* v = std::get_if<std::int64_t>(&a.value)) return *v;
  if (const auto* b = std::get_if<bool>(&a.value)) return *b ? 1 : 0;
  throw TraceError(fmt::format("{}: node {}: attribute \"{}\": expected an integer, found another type", origin, node, a.name));
}

ChakraTrace parse_chakra_trace(const std::string& bytes, const std::string& origin) {
  ChakraTrace t;
  t.path = origin;
  std::size_t pos = 0;
  std::size_t index = 0;
  while (pos < bytes.size()) {
    const std::string where = index == 0 ? fmt::format("{}: the global metadata (message 0)", origin)
                                         : fmt::format("{}: message {} (node {})", origin, index, index - 1);
    std::uint64_t length = 0;
    if (!read_varint(bytes, pos, length)) {
      throw TraceError(fmt::format("{}: expected a message length (varint), found the file's end or a malformed one", where));
    }
    if (length > kMaxMessageBytes || length > bytes.size() - pos) {
      throw TraceError(fmt::format("{}: expected a message of at most {} bytes within the file, found a length of {} with {} "
                                   "bytes left (truncated, or not a Chakra ET)",
                                   where, std::min<std::uint64_t>(kMaxMessageBytes, bytes.size() - pos), length,
                                   bytes.size() - pos));
    }
    const char* data = bytes.data() + pos;
    pos += length;
    if (index == 0) {
      pb::GlobalMetadata m;
      if (!m.ParseFromArray(data, static_cast<int>(length)) || has_unknown_fields(m)) {
        throw TraceError(fmt::format("{}: expected Chakra's GlobalMetadata, found bytes it does not parse as (not a Chakra ET, "
                                     "or another schema)",
                                     where));
      }
      t.version = m.version();
      for (const auto& a : m.attr()) t.metadata.push_back(from_proto(a, where));
    } else {
      pb::Node m;
      if (!m.ParseFromArray(data, static_cast<int>(length)) || has_unknown_fields(m)) {
        throw TraceError(fmt::format("{}: expected a Chakra Node, found bytes it does not parse as (fields of another schema "
                                     "version, or corrupt)",
                                     where));
      }
      ChakraNode n;
      n.id = m.id();
      n.name = m.name();
      if (m.type() < 0 || m.type() > static_cast<int>(ChakraNodeType::comm_coll)) {
        throw TraceError(fmt::format("{}: node id {}: expected a node type 0-7 (COMP_NODE, COMM_COLL_NODE, ...), found {}", where,
                                     n.id, static_cast<int>(m.type())));
      }
      n.type = static_cast<ChakraNodeType>(m.type());
      n.ctrl_deps.assign(m.ctrl_deps().begin(), m.ctrl_deps().end());
      n.data_deps.assign(m.data_deps().begin(), m.data_deps().end());
      n.start_time_micros = m.start_time_micros();
      n.duration_micros = m.duration_micros();
      const std::string at = fmt::format("{}: node id {}", where, n.id);
      for (const auto& a : m.attr()) n.attrs.push_back(from_proto(a, at));
      t.nodes.push_back(std::move(n));
    }
    ++index;
  }
  if (index == 0) throw TraceError(fmt::format("{}: expected a Chakra ET (a GlobalMetadata message, then nodes), found an empty file", origin));
  return t;
}

ChakraTrace read_chakra_trace(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::is_regular_file(status)) {
    throw TraceError(fmt::format("{}: expected a Chakra ET file, found {}", path,
                                 ec || !std::filesystem::exists(status) ? "no such file" : "something that is not a regular file"));
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size > kMaxFileBytes) {
    throw TraceError(fmt::format("{}: expected a Chakra ET of at most {} bytes, found {}", path, kMaxFileBytes,
                                 ec ? std::string("a size that cannot be read") : std::to_string(size)));
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes(size, '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) {
    throw TraceError(fmt::format("{}: could not read the file", path));
  }
  return parse_chakra_trace(bytes, path);
}

void write_chakra_trace(std::ostream& os, const ChakraTrace& t) {
  pb::GlobalMetadata meta;
  meta.set_version(t.version);
  for (const ChakraAttr& a : t.metadata) to_proto(a, *meta.add_attr());
  write_delimited(os, meta);
  pb::Node m;
  for (const ChakraNode& n : t.nodes) {
    m.Clear();
    m.set_id(n.id);
    m.set_name(n.name);
    m.set_type(static_cast<pb::NodeType>(static_cast<int>(n.type)));
    for (const std::uint64_t d : n.ctrl_deps) m.add_ctrl_deps(d);
    for (const std::uint64_t d : n.data_deps) m.add_data_deps(d);
    m.set_start_time_micros(n.start_time_micros);
    m.set_duration_micros(n.duration_micros);
    for (const ChakraAttr& a : n.attrs) to_proto(a, *m.add_attr());
    write_delimited(os, m);
  }
}

bool is_chakra_path(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".et") == 0) return true;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    return fs::exists(path + ".0.et", ec);  // a prefix
  }
  for (const auto& e : fs::directory_iterator(path, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".et") == 0) return true;
  }
  return false;
}

std::vector<std::string> chakra_rank_files(const std::string& path) {
  namespace fs = std::filesystem;
  static const std::regex kRankFile(R"((.*)\.(\d{1,7})\.et)");
  std::error_code ec;
  fs::path dir;
  std::string prefix;  // empty: any, from the directory
  std::smatch m;
  const std::string leaf = fs::path(path).filename().string();
  if (fs::is_directory(path, ec)) {
    dir = path;
  } else if (std::regex_match(leaf, m, kRankFile)) {
    dir = fs::path(path).parent_path();
    prefix = m[1];
  } else {
    dir = fs::path(path).parent_path();
    prefix = leaf;
  }
  if (dir.empty()) dir = ".";
  std::map<std::string, std::map<long, std::string>> by_prefix;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    std::smatch f;
    if (!std::regex_match(name, f, kRankFile)) continue;
    if (!prefix.empty() && f[1] != prefix) continue;
    by_prefix[f[1]][std::stol(f[2])] = e.path().string();
  }
  if (ec) throw TraceError(fmt::format("{}: could not list the directory: {}", dir.string(), ec.message()));
  if (by_prefix.empty()) {
    throw TraceError(fmt::format("{}: expected Chakra per-rank files PREFIX.RANK.et, found none", path));
  }
  if (by_prefix.size() > 1) {
    std::string names;
    for (const auto& [p, files] : by_prefix) names += fmt::format("{}\"{}\" ({} ranks)", names.empty() ? "" : ", ", p, files.size());
    throw TraceError(fmt::format("{}: expected the rank files of one workload, found several prefixes: {}; name one "
                                 "(DIR/PREFIX)",
                                 path, names));
  }
  const auto& files = by_prefix.begin()->second;
  std::vector<std::string> out;
  for (const auto& [rank, file] : files) {
    if (rank != static_cast<long>(out.size())) {
      throw TraceError(fmt::format("{}: expected rank files {}.0.et to {}.{}.et, found rank {} missing", path,
                                   by_prefix.begin()->first, by_prefix.begin()->first, files.rbegin()->first, out.size()));
    }
    out.push_back(file);
  }
  return out;
}

}  // namespace foresight::trace
