#pragma once
/// Fields the measured datasets of validate/data share, read one way.

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/json_reader.hpp"
#include "topologies/gpu_spec.hpp"

namespace foresight::validate {

/// `key` of `o`: the catalog name of the GPU a dataset was measured on (foresight --list);
/// ConfigError naming file, pointer, expected and found otherwise.
inline std::string catalog_gpu_at(const topo::JsonReader& r, const nlohmann::json& o, std::string_view key,
                                  const topo::JsonPath& p, std::string_view what) {
  std::string gpu = r.string_at(o, key, p, what);
  if (topo::try_find_gpu_spec(gpu) == nullptr) {
    r.fail(p.at(key), fmt::format("expected a catalog GPU name (foresight --list), found \"{}\"", gpu));
  }
  return gpu;
}

}  // namespace foresight::validate
