#include "python/scenario_args.hpp"

#include <fmt/core.h>

#include <filesystem>

#include "common/error.hpp"
#include "python/json_bridge.hpp"
#include "traces/profile_db_json.hpp"

namespace foresight::python {
namespace py = pybind11;

namespace {

bool is_path(py::handle value) { return py::isinstance<py::str>(value) || py::hasattr(value, "__fspath__"); }

std::string path_text(py::handle value) {
  return py::module_::import("os").attr("fsdecode")(value).cast<std::string>();
}

}  // namespace

strategy::ScenarioSource scenario_source(py::handle scenario, py::handle base_dir) {
  if (is_path(scenario)) {
    if (!base_dir.is_none()) {
      throw sim::ConfigError(
          "base_dir: only for a scenario given as a dict (a scenario file's relative paths resolve against its folder)");
    }
    return {path_text(scenario), std::nullopt};
  }
  if (py::isinstance<py::dict>(scenario)) {
    const std::string base = optional_path(base_dir, "base_dir");
    const std::string name = base.empty() ? "<dict>" : (std::filesystem::path(base) / "<dict>").string();
    nlohmann::json doc = from_python(scenario, name);
    return {name, std::move(doc)};
  }
  throw py::type_error(fmt::format("scenario: expected a dict (a scenario document) or a path (str or os.PathLike), found {}",
                                   type_name(scenario)));
}

std::vector<strategy::Override> override_list(py::handle overrides) {
  std::vector<strategy::Override> out;
  if (overrides.is_none()) return out;
  if (py::isinstance<py::dict>(overrides)) {
    for (const auto& [key, value] : py::reinterpret_borrow<py::dict>(overrides)) {
      if (!py::isinstance<py::str>(key)) {
        throw sim::ConfigError(fmt::format("overrides: expected PATH strings such as \"plan.tp\" as keys, found {} ({})",
                                           py::repr(key).cast<std::string>(), type_name(key)));
      }
      const std::string path = key.cast<std::string>();
      out.push_back({path, override_text(value, "overrides[" + path + "]")});
    }
    return out;
  }
  if (py::isinstance<py::list>(overrides) || py::isinstance<py::tuple>(overrides)) {
    for (const py::handle item : overrides) {
      if (!py::isinstance<py::str>(item)) {
        throw sim::ConfigError(fmt::format("overrides: expected \"PATH=VALUE\" strings such as \"plan.tp=8\", found {} ({})",
                                           py::repr(item).cast<std::string>(), type_name(item)));
      }
      out.push_back(strategy::parse_override(item.cast<std::string>()));
    }
    return out;
  }
  throw py::type_error(fmt::format(
      "overrides: expected a dict {{PATH: VALUE}} or a list of \"PATH=VALUE\" strings, found {}", type_name(overrides)));
}

int optional_count(py::handle value, const std::string& name, int min) {
  if (value.is_none()) return 0;
  if (!py::isinstance<py::bool_>(value) && (py::isinstance<py::int_>(value) || py::hasattr(value, "__index__"))) {
    const nlohmann::json v = from_python(value, name);
    if (v.is_number_integer() && v.get<long long>() >= min && v.get<long long>() <= (1LL << 30)) return v.get<int>();
  }
  throw sim::ConfigError(
      fmt::format("{}: expected an integer >= {}, found {}", name, min, py::repr(value).cast<std::string>()));
}

std::string optional_path(py::handle value, const std::string& name) {
  if (value.is_none()) return "";
  if (!is_path(value)) {
    throw py::type_error(fmt::format("{}: expected a path (str or os.PathLike), found {}", name, type_name(value)));
  }
  return path_text(value);
}

strategy::InputFiles input_files(const strategy::InputPaths& paths) {
  return strategy::InputFiles(paths, &trace::load_profile_db);
}

}  // namespace foresight::python
