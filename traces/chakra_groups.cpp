// ASTRA-sim's comm-group file ({"NAME": [rank, ...]}), read and written (traces/chakra_graph.hpp).
#include <fmt/core.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "traces/chakra_graph.hpp"

namespace foresight::trace {
using sim::ConfigError;
/// Helpers (a named namespace: the unity build joins this file with others).
namespace chakra_groups_detail {

/// The comm groups of a parsed comm-group document; ConfigError naming `path` and the key.
ChakraGroups groups_of(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) throw ConfigError(fmt::format("{}: expected an object of group names to rank lists, found {}", path, j.type_name()));
  ChakraGroups out;
  for (const auto& [name, ranks] : j.items()) {
    if (!ranks.is_array() || ranks.empty()) {
      throw ConfigError(fmt::format("{}: \"{}\": expected a non-empty array of ranks, found {}", path, name, ranks.dump()));
    }
    std::set<int> seen;
    std::vector<int> members;
    for (const auto& r : ranks) {
      if (!r.is_number_integer() || r.get<long long>() < 0 || r.get<long long>() > std::numeric_limits<int>::max()) {
        throw ConfigError(fmt::format("{}: \"{}\": expected ranks (integers >= 0), found {}", path, name, r.dump()));
      }
      if (!seen.insert(r.get<int>()).second) throw ConfigError(fmt::format("{}: \"{}\": rank {} appears twice", path, name, r.get<int>()));
      members.push_back(r.get<int>());
    }
    out.emplace(name, std::move(members));
  }
  return out;
}

}  // namespace chakra_groups_detail
using namespace chakra_groups_detail;

ChakraGroups read_chakra_groups(const std::string& path) {
  return groups_of(topo::JsonReader(path, sim::ErrorKind::config).parse_file(), path);
}

ChakraGroups parse_chakra_groups(std::string_view text, const std::string& origin) {
  return groups_of(topo::JsonReader(origin, sim::ErrorKind::config).parse(text), origin);
}

std::string chakra_groups_json(const ChakraGroups& groups) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [name, ranks] : groups) j[name] = ranks;
  return j.dump(1) + "\n";
}

}  // namespace foresight::trace
