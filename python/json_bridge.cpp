#include "python/json_bridge.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/error.hpp"
#include "common/json_reader.hpp"

namespace foresight::python {
namespace py = pybind11;
using nlohmann::json;

namespace {

/// Where a value is: a reader named after the document reports errors as every Foresight input
/// does ("ORIGIN: /pointer: message").
struct Where {
  const topo::JsonReader& reader;
  topo::JsonPath path;
  [[noreturn]] void fail(const std::string& what) const { reader.fail(path, what); }
};

json integer(py::handle value, const Where& at) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow == 0) {
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    return json(static_cast<std::int64_t>(v));
  }
  if (overflow > 0) {
    const unsigned long long u = PyLong_AsUnsignedLongLong(value.ptr());
    if (!PyErr_Occurred()) return json(static_cast<std::uint64_t>(u));
    PyErr_Clear();
  }
  at.fail(fmt::format("expected an integer that fits 64 bits, found {}", py::str(value).cast<std::string>()));
}

json value_at(py::handle value, const Where& at) {
  // As deep as the JSON reader lets a file nest (topo::JsonReader::kMaxDepth); a dict that
  // contains itself would recurse forever.
  const std::string& pointer = at.path.pointer;
  if (std::count(pointer.begin(), pointer.end(), '/') > topo::JsonReader::kMaxDepth) {
    at.fail(fmt::format("expected at most {} levels of nesting (does a dict or list contain itself?)",
                        topo::JsonReader::kMaxDepth));
  }
  if (value.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) return integer(value, at);
  if (py::isinstance<py::float_>(value)) return value.cast<double>();
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (py::hasattr(value, "__fspath__")) {
    return py::module_::import("os").attr("fsdecode")(value).cast<std::string>();
  }
  if (py::isinstance<py::dict>(value) || py::hasattr(value, "keys")) {
    json out = json::object();
    for (const py::handle key : py::iter(value.attr("keys")())) {
      if (!py::isinstance<py::str>(key)) {
        at.fail(fmt::format("expected an object with string keys, found the key {} ({})", py::repr(key).cast<std::string>(),
                            type_name(key)));
      }
      const std::string k = key.cast<std::string>();
      out[k] = value_at(value[key], {at.reader, at.path.at(k)});
    }
    return out;
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    json out = json::array();
    std::size_t i = 0;
    for (const py::handle e : value) out.push_back(value_at(e, {at.reader, at.path.at(i++)}));
    return out;
  }
  // numpy and other numeric scalars: integers through __index__, reals through __float__.
  if (py::hasattr(value, "__index__")) {
    const auto index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
    if (!index) throw py::error_already_set();
    return integer(index, at);
  }
  if (py::hasattr(value, "__float__") && !py::hasattr(value, "__len__")) {
    return py::float_(py::reinterpret_borrow<py::object>(value)).cast<double>();
  }
  at.fail(fmt::format("expected a JSON value (dict, list, str, int, float, bool or None), found {}", type_name(value)));
}

}  // namespace

std::string type_name(py::handle value) {
  const py::handle type = py::type::handle_of(value);
  const std::string module = py::str(type.attr("__module__")).cast<std::string>();
  const std::string name = py::str(type.attr("__qualname__")).cast<std::string>();
  return module == "builtins" ? name : module + "." + name;
}

py::object to_python(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
    case json::value_t::discarded:
      return py::none();
    case json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case json::value_t::number_integer:
      return py::int_(j.get<std::int64_t>());
    case json::value_t::number_unsigned:
      return py::int_(j.get<std::uint64_t>());
    case json::value_t::number_float: {
      const double v = j.get<double>();
      return std::isfinite(v) ? py::object(py::float_(v)) : py::object(py::none());
    }
    case json::value_t::string:
      return py::str(j.get_ref<const std::string&>());
    case json::value_t::array: {
      py::list out;
      for (const json& e : j) out.append(to_python(e));
      return out;
    }
    case json::value_t::object: {
      py::dict out;
      for (const auto& [key, e] : j.items()) out[py::str(key)] = to_python(e);
      return out;
    }
    case json::value_t::binary:
      break;
  }
  throw sim::InternalError("to_python: a binary JSON value has no Python form");
}

json from_python(py::handle value, const std::string& origin, const std::string& pointer) {
  const topo::JsonReader reader(origin, sim::ErrorKind::config);
  return value_at(value, {reader, {pointer, ""}});
}

std::string override_text(py::handle value, const std::string& where) {
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  return from_python(value, where).dump();
}

}  // namespace foresight::python
