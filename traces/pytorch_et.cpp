#include "traces/pytorch_et.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "traces/kineto.hpp"

namespace foresight::trace {
/// Helpers (a named namespace: the unity build joins this file with others).
namespace et_reader_detail {

using nlohmann::json;
using sim::TraceError;

/// Where a node is, for messages: "FILE: /nodes/INDEX (id ID, NAME)".
struct NodeWhere {
  const std::string& origin;
  std::size_t index;
  const json& node;
  std::string operator()(std::string_view field) const {
    std::string id = "?";
    if (const auto it = node.find("id"); it != node.end() && it->is_number_integer()) id = std::to_string(it->get<std::int64_t>());
    std::string name;
    if (const auto it = node.find("name"); it != node.end() && it->is_string()) name = ", \"" + it->get<std::string>() + "\"";
    return fmt::format("{}: /nodes/{}{} (id {}{})", origin, index, field.empty() ? "" : "/" + std::string(field), id, name);
  }
};

[[noreturn]] void fail(const NodeWhere& w, std::string_view field, const std::string& what) {
  throw TraceError(fmt::format("{}: {}", w(field), what));
}

std::int64_t integer(const json& v, const NodeWhere& w, std::string_view field) {
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u <= static_cast<std::uint64_t>(INT64_MAX)) return static_cast<std::int64_t>(u);
  }
  fail(w, field, fmt::format("expected an integer, found {}", topo::shown(v)));
}

double number(const json& v, const NodeWhere& w, std::string_view field) {
  if (!v.is_number()) fail(w, field, fmt::format("expected a number, found {}", topo::shown(v)));
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < 0.0) fail(w, field, fmt::format("expected a finite number >= 0, found {}", topo::shown(v)));
  return d;
}

/// A tensor: [id, storage, offset, elements, bytes per element, device].
EtTensor tensor(const json& v, const NodeWhere& w, std::string_view field) {
  if (!v.is_array() || v.size() != 6 || !v[5].is_string()) {
    fail(w, field, fmt::format("expected a tensor [id, storage, offset, elements, element bytes, device], found {}", topo::shown(v)));
  }
  EtTensor t;
  t.id = integer(v[0], w, field);
  t.storage = integer(v[1], w, field);
  t.offset = integer(v[2], w, field);
  t.elements = integer(v[3], w, field);
  t.element_bytes = integer(v[4], w, field);
  t.device = v[5].get<std::string>();
  if (t.elements < 0 || t.element_bytes < 0 || t.element_bytes > 64) {
    fail(w, field, fmt::format("expected a tensor's element count >= 0 and 0-64 bytes per element, found {} and {}", t.elements,
                               t.element_bytes));
  }
  return t;
}

/// The shape of a tensor argument: a list of integers (the first tensor's, for a list).
std::vector<std::int64_t> shape_of(const json& s, const NodeWhere& w, std::string_view field) {
  std::vector<std::int64_t> out;
  const json* dims = &s;
  if (dims->is_array() && !dims->empty() && (*dims)[0].is_array()) dims = &(*dims)[0];  // a list of tensors
  if (!dims->is_array()) return out;
  for (const json& d : *dims) {
    if (!d.is_number_integer()) return {};  // nested (a list of lists of scalars): no tensor shape
    out.push_back(integer(d, w, field));
  }
  return out;
}

/// One argument from its value, type and shape.
EtArg argument(const json& value, const std::string& type, const json* shape, const NodeWhere& w, const std::string& field) {
  EtArg a;
  a.type = type;
  if (type.rfind("Tensor", 0) == 0) {
    if (!value.is_null()) a.tensors.push_back(tensor(value, w, field));
  } else if (type.find("[Tensor") != std::string::npos) {  // GenericList[Tensor(float)], ...
    if (!value.is_array()) fail(w, field, fmt::format("expected a list of tensors, found {}", topo::shown(value)));
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (value[i].is_array() && value[i].size() == 6 && value[i][5].is_string()) a.tensors.push_back(tensor(value[i], w, field));
    }
  } else if (type == "Int" && (value.is_number_integer() || value.is_number_unsigned())) {
    a.integer = integer(value, w, field);
  } else if (type == "Bool" && value.is_boolean()) {
    a.boolean = value.get<bool>();
  } else if ((type == "String" || type == "Device") && value.is_string()) {
    a.text = value.get<std::string>();
  } else if (value.is_array()) {
    for (const json& x : value) {
      if (x.is_number_integer()) a.integers.push_back(x.get<std::int64_t>());
      if (x.is_boolean()) a.bools.push_back(x.get<bool>());
    }
  }
  if (shape != nullptr && !a.tensors.empty()) a.shape = shape_of(*shape, w, field);
  return a;
}

/// Arguments of the 1.0.1 layout: parallel lists of values, shapes and types.
std::vector<EtArg> arguments(const json& values, const json* shapes, const json* types, const NodeWhere& w,
                             const std::string& field) {
  std::vector<EtArg> out;
  if (values.is_null()) return out;
  if (!values.is_array()) fail(w, field, fmt::format("expected a list of arguments, found {}", topo::shown(values)));
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::string type;
    if (types != nullptr && types->is_array() && i < types->size() && (*types)[i].is_string()) type = (*types)[i].get<std::string>();
    const json* shape = shapes != nullptr && shapes->is_array() && i < shapes->size() ? &(*shapes)[i] : nullptr;
    out.push_back(argument(values[i], type, shape, w, fmt::format("{}/{}", field, i)));
  }
  return out;
}

/// The 1.0.2+ layout's {values, shapes, types}.
std::vector<EtArg> arguments(const json& group, const NodeWhere& w, const std::string& field) {
  if (group.is_null()) return {};
  if (!group.is_object()) fail(w, field, fmt::format("expected {{values, shapes, types}}, found {}", topo::shown(group)));
  const auto values = group.find("values");
  if (values == group.end()) return {};
  const auto shapes = group.find("shapes");
  const auto types = group.find("types");
  return arguments(*values, shapes != group.end() ? &*shapes : nullptr, types != group.end() ? &*types : nullptr, w,
                   field + "/values");
}

const json* find(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::string text_or(const json& obj, const char* key) {
  const json* v = find(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

/// The process groups that "## process_group:init ##" lists (a JSON string).
std::vector<PytorchEt::Group> groups_of(const EtNode& n, const NodeWhere& w) {
  std::vector<PytorchEt::Group> out;
  if (n.inputs.empty() || !n.inputs.front().text) return out;
  json list;
  try {
    list = json::parse(*n.inputs.front().text);
  } catch (const json::exception&) {
    fail(w, "inputs", "expected the process groups as a JSON list in its first input");
  }
  if (!list.is_array()) fail(w, "inputs", "expected the process groups as a JSON list in its first input");
  for (const json& g : list) {
    if (!g.is_object()) continue;
    PytorchEt::Group group;
    group.name = text_or(g, "pg_name");
    if (const json* s = find(g, "group_size"); s != nullptr && s->is_number_integer()) group.size = s->get<int>();
    if (const json* r = find(g, "ranks"); r != nullptr && r->is_array()) {
      for (const json& x : *r) {
        if (x.is_number_integer()) group.ranks.push_back(x.get<int>());
      }
    }
    out.push_back(std::move(group));
  }
  return out;
}

/// The number at the end of a file name's stem (host.3.json, dlrm_eg_12.json), or -1.
long trailing_number(const std::string& path) {
  std::string stem = path.substr(path.find_last_of("/:") + 1);
  for (const char* ext : {".json.gz", ".json"}) {
    if (stem.size() > std::string_view(ext).size() && stem.ends_with(ext)) stem.resize(stem.size() - std::string_view(ext).size());
  }
  std::size_t end = stem.size();
  std::size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(stem[begin - 1])) != 0) --begin;
  if (begin == end || end - begin > 9) return -1;
  return std::stol(stem.substr(begin, end - begin));
}

}  // namespace et_reader_detail
using namespace et_reader_detail;

bool PytorchEt::has_device_ops() const {
  return std::any_of(nodes.begin(), nodes.end(), [](const EtNode& n) { return n.gpu_op(); });
}

bool looks_like_pytorch_et(std::string_view text) {
  const std::string_view head = text.substr(0, 4096);
  const auto brace = head.find_first_not_of(" \t\r\n");
  return brace != std::string_view::npos && head[brace] == '{' && head.find("\"schema\"") != std::string_view::npos &&
         head.find("\"nodes\"") != std::string_view::npos && head.find("\"traceEvents\"") == std::string_view::npos;
}

PytorchEt parse_pytorch_et(const std::string& text, const std::string& origin) {
  const json doc = topo::JsonReader(origin, sim::ErrorKind::trace).parse(text);
  if (!doc.is_object() || !doc.contains("nodes") || !doc["nodes"].is_array()) {
    throw TraceError(fmt::format("{}: expected a PyTorch execution trace: an object with a \"nodes\" list", origin));
  }
  PytorchEt et;
  et.path = origin;
  et.schema = text_or(doc, "schema");
  const json& nodes = doc["nodes"];
  et.nodes.reserve(nodes.size());
  std::map<std::uint64_t, std::size_t> seen;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const json& j = nodes[i];
    const NodeWhere w{origin, i, j};
    if (!j.is_object()) fail(w, "", fmt::format("expected a node object, found {}", topo::shown(j)));
    EtNode n;
    const json* id = find(j, "id");
    if (id == nullptr) fail(w, "id", "expected the node's id, found none");
    const std::int64_t id_value = integer(*id, w, "id");
    if (id_value < 0) fail(w, "id", fmt::format("expected an id >= 0, found {}", id_value));
    n.id = static_cast<std::uint64_t>(id_value);
    if (!seen.emplace(n.id, i).second) fail(w, "id", fmt::format("id {} is also node {}'s", n.id, seen[n.id]));
    const json* name = find(j, "name");
    if (name == nullptr || !name->is_string()) fail(w, "name", "expected the op's name as a string");
    n.name = name->get<std::string>();
    const json* parent = find(j, "ctrl_deps");
    if (parent == nullptr) parent = find(j, "parent");
    if (parent != nullptr) {
      const std::int64_t p = integer(*parent, w, "ctrl_deps");
      if (p < 0) fail(w, "ctrl_deps", fmt::format("expected a parent id >= 0, found {}", p));
      n.parent = static_cast<std::uint64_t>(p);
    }
    const json* inputs = find(j, "inputs");
    if (inputs != nullptr && inputs->is_object()) {  // 1.0.2 and later
      n.inputs = arguments(*inputs, w, "inputs");
      if (const json* o = find(j, "outputs")) n.outputs = arguments(*o, w, "outputs");
    } else {  // 1.0.1
      if (inputs != nullptr) n.inputs = arguments(*inputs, find(j, "input_shapes"), find(j, "input_types"), w, "inputs");
      if (const json* o = find(j, "outputs")) n.outputs = arguments(*o, find(j, "output_shapes"), find(j, "output_types"), w, "outputs");
    }
    // Scalar fields: top-level in 1.0.1, attributes later (the linker adds its own at top level).
    std::map<std::string, const json*> fields;
    for (const char* key : {"rf_id", "tid", "scope", "cat", "ts", "inclusive_dur", "exclusive_dur", "stream", "pg_name"}) {
      if (const json* v = find(j, key)) fields[key] = v;
    }
    if (const json* attrs = find(j, "attrs")) {
      if (!attrs->is_array()) fail(w, "attrs", fmt::format("expected a list of {{name, type, value}}, found {}", topo::shown(*attrs)));
      for (std::size_t k = 0; k < attrs->size(); ++k) {
        const json& a = (*attrs)[k];
        if (!a.is_object() || !a.contains("name") || !a["name"].is_string() || !a.contains("value")) {
          fail(w, fmt::format("attrs/{}", k), fmt::format("expected {{name, type, value}}, found {}", topo::shown(a)));
        }
        fields[a["name"].get<std::string>()] = &a["value"];
      }
    }
    const auto field = [&](const char* key) -> const json* {
      const auto it = fields.find(key);
      return it == fields.end() || it->second->is_null() ? nullptr : it->second;
    };
    if (const json* v = field("rf_id")) n.rf_id = integer(*v, w, "rf_id");
    if (const json* v = field("tid")) n.tid = integer(*v, w, "tid");
    if (const json* v = field("scope")) n.scope = static_cast<int>(std::clamp<std::int64_t>(integer(*v, w, "scope"), -1, 255));
    if (const json* v = field("cat"); v != nullptr && v->is_string()) n.cat = v->get<std::string>();
    if (const json* v = field("ts")) n.ts_us = number(*v, w, "ts");
    if (const json* v = field("inclusive_dur")) n.inclusive_us = number(*v, w, "inclusive_dur");
    if (const json* v = field("exclusive_dur")) n.exclusive_us = number(*v, w, "exclusive_dur");
    if (const json* v = field("stream")) n.stream = integer(*v, w, "stream");
    if (const json* v = field("collective_name"); v != nullptr && v->is_string()) n.collective_name = v->get<std::string>();
    if (const json* v = field("pg_name"); v != nullptr && v->is_string()) n.pg_name = v->get<std::string>();
    if (const json* v = field("pg_size")) {
      n.pg_size = integer(*v, w, "pg_size");
      if (n.pg_size < 1) fail(w, "pg_size", fmt::format("expected a process group of at least 1 rank, found {}", n.pg_size));
    }
    if (n.gpu_op() && n.inclusive_us < 0.0) fail(w, "inclusive_dur", "expected a GPU op's duration (inclusive_dur, us), found none");
    if (n.name.find("process_group:init") != std::string::npos) {
      for (PytorchEt::Group& g : groups_of(n, w)) et.groups.push_back(std::move(g));
    }
    et.nodes.push_back(std::move(n));
  }
  std::stable_sort(et.nodes.begin(), et.nodes.end(), [](const EtNode& a, const EtNode& b) { return a.id < b.id; });
  return et;
}

std::vector<PytorchEt> load_pytorch_ets(const std::string& path) {
  std::vector<PytorchEt> out;
  if (path.ends_with(".tar.gz") || path.ends_with(".tgz")) {
    for (const auto& [member, text] : read_tar_gz_json(path)) out.push_back(parse_pytorch_et(text, path + ":" + member));
    if (out.empty()) throw TraceError(fmt::format("{}: the archive holds no .json execution trace", path));
  } else {
    out.push_back(parse_pytorch_et(read_trace_text(path), path));
  }
  std::vector<long> number;
  for (const PytorchEt& e : out) number.push_back(trailing_number(e.path));
  std::vector<long> sorted = number;
  std::sort(sorted.begin(), sorted.end());
  const bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end() && sorted.front() >= 0;
  if (distinct) {
    std::vector<std::size_t> order(out.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return number[a] < number[b]; });
    std::vector<PytorchEt> ranked;
    for (const std::size_t i : order) ranked.push_back(std::move(out[i]));
    out = std::move(ranked);
  }
  return out;
}

bool is_pytorch_et_path(const std::string& path) {
  try {
    if (path.ends_with(".tar.gz") || path.ends_with(".tgz")) {
      const auto members = read_tar_gz_json(path);
      return !members.empty() && looks_like_pytorch_et(members.front().second);
    }
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return false;
    return looks_like_pytorch_et(read_trace_text(path));
  } catch (const sim::Error&) {
    return false;
  }
}

}  // namespace foresight::trace
