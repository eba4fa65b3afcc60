#pragma once
/// JSON documents to and from Python values: what the module takes (scenario dicts, override
/// values) and what it returns (the CLI's --json objects as dicts and lists).

#include <pybind11/pybind11.h>

#include <nlohmann/json.hpp>
#include <string>

namespace foresight::python {

/// `j` as plain Python values: objects as dicts, arrays as lists, numbers as int or float,
/// null as None. Non-finite numbers become None, as `nlohmann::json::dump` writes them (null),
/// so the result equals json.loads of the CLI's output.
pybind11::object to_python(const nlohmann::json& j);

/// A Python value as JSON: None, bool, int, float, str, os.PathLike (its path as a string),
/// mappings with str keys and sequences (list, tuple); numpy scalars through __index__ and
/// __float__. ConfigError naming `origin` and the JSON pointer of the value otherwise, e.g.
/// "<dict>: /plan/dp: expected a JSON value (dict, list, str, int, float, bool or None), found set".
nlohmann::json from_python(pybind11::handle value, const std::string& origin, const std::string& pointer = "");

/// The text an override takes (strategy::Override::value): a str as it is (as --set PATH=VALUE
/// reads it), anything else as its JSON.
std::string override_text(pybind11::handle value, const std::string& where);

/// The type name of `value` for messages ("int", "numpy.ndarray").
std::string type_name(pybind11::handle value);

}  // namespace foresight::python
