#include "traces/profile_db_json.hpp"

#include <fmt/core.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.hpp"
#include "common/json_reader.hpp"

namespace foresight::trace {
namespace {

using nlohmann::json;

/// The longest kernel a database may hold: sim::Time's range (9.2e18 ps, common/units.cpp).
constexpr double kMaxSeconds = 9.2e6;

[[noreturn]] void fail(const std::string& path, const std::string& pointer,
                       const std::string& what) {
  throw sim::ConfigError(fmt::format("{}: {}: {}", path, pointer.empty() ? "/" : pointer, what));
}

std::string shown(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return fmt::format("{} {}", v.type_name(), s);
}

void only_keys(const std::string& path, const std::string& pointer, const json& o,
               std::initializer_list<std::string_view> keys) {
  if (!o.is_object()) fail(path, pointer, fmt::format("expected an object, found {}", shown(o)));
  for (const auto& [k, v] : o.items()) {
    bool known = false;
    for (const auto key : keys) known = known || key == k;
    if (!known) fail(path, pointer + "/" + k, fmt::format("unknown key \"{}\"", k));
  }
}

const json& need(const std::string& path, const std::string& pointer, const json& o,
                 const char* key) {
  if (!o.contains(key)) fail(path, pointer, fmt::format("missing required key \"{}\"", key));
  return o.at(key);
}

std::string need_string(const std::string& path, const std::string& pointer, const json& o,
                        const char* key) {
  const json& v = need(path, pointer, o, key);
  if (!v.is_string())
    fail(path, pointer + "/" + key, fmt::format("expected a string, found {}", shown(v)));
  return v.get<std::string>();
}

}  // namespace

sim::ProfileDb load_profile_db(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw sim::ConfigError(fmt::format("{}: cannot open the profile database", path));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_profile_db(text.str(), path);
}

sim::ProfileDb parse_profile_db(std::string_view text, const std::string& path) {
  // The shared reader: syntax errors with their byte, nesting bounded (JsonReader::kMaxDepth).
  const json doc = topo::JsonReader(path, sim::ErrorKind::config).parse(text);
  only_keys(path, "", doc, {"format", "version", "gpu", "source", "memory_timing", "provenance", "kernels"});
  if (need_string(path, "", doc, "format") != "foresight-profile-db") {
    fail(path, "/format",
         fmt::format("expected \"foresight-profile-db\", found {}", shown(doc["format"])));
  }
  const json& version = need(path, "", doc, "version");
  if (!version.is_number_integer() || version.get<int>() != 1) {
    fail(path, "/version", fmt::format("expected 1, found {}", shown(version)));
  }
  sim::ProfileDb db;
  db.gpu = need_string(path, "", doc, "gpu");
  db.source = need_string(path, "", doc, "source");
  if (doc.contains("memory_timing")) {
    const std::string timing = need_string(path, "", doc, "memory_timing");
    if (timing == "copy") {
      db.memory_timing = sim::MemoryTiming::copy;
    } else if (timing != "kernel") {
      fail(path, "/memory_timing", fmt::format("expected \"kernel\" or \"copy\", found {}", shown(doc["memory_timing"])));
    }
  }
  if (doc.contains("provenance")) {
    if (!doc["provenance"].is_object())
      fail(path, "/provenance",
           fmt::format("expected an object, found {}", shown(doc["provenance"])));
    for (const auto& [k, v] : doc["provenance"].items()) {
      if (!v.is_primitive())
        fail(path, "/provenance/" + k,
             fmt::format("expected a string or number, found {}", shown(v)));
    }
  }
  const json& kernels = need(path, "", doc, "kernels");
  if (!kernels.is_array())
    fail(path, "/kernels", fmt::format("expected an array, found {}", shown(kernels)));
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const std::string p = fmt::format("/kernels/{}", i);
    const json& k = kernels[i];
    only_keys(path, p, k, {"kernel", "type", "dtype", "shape", "batch_axis", "seconds"});
    sim::OpSignature sig;
    sig.kernel = need_string(path, p, k, "kernel");
    sig.type = sim::parse_op_type(need_string(path, p, k, "type"), path + ": " + p + "/type");
    sig.dtype = sim::parse_dtype(need_string(path, p, k, "dtype"), path + ": " + p + "/dtype");
    const json& shape = need(path, p, k, "shape");
    if (!shape.is_array())
      fail(path, p + "/shape", fmt::format("expected an array of sizes, found {}", shown(shape)));
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (!shape[d].is_number_integer() || shape[d].get<long long>() < 0) {
        fail(path, fmt::format("{}/shape/{}", p, d),
             fmt::format("expected a size >= 0, found {}", shown(shape[d])));
      }
      sig.shape.push_back(shape[d].get<std::int64_t>());
    }
    const json& axis = need(path, p, k, "batch_axis");
    if (!axis.is_number_integer() || axis.get<long long>() < 0 ||
        axis.get<std::size_t>() >= std::max<std::size_t>(1, sig.shape.size())) {
      fail(path, p + "/batch_axis",
           fmt::format("expected an index into shape, found {}", shown(axis)));
    }
    sig.batch_axis = static_cast<std::uint8_t>(axis.get<int>());
    // A kernel at batch 0 made every larger batch infinitely slow (its time scaled by b / 0), and
    // a duration past sim::Time's range threw InternalError when simulated (issue 25).
    if (sig.batch() < 1) {
      fail(path, fmt::format("{}/shape/{}", p, sig.batch_axis),
           fmt::format("expected a batch size >= 1 at batch_axis, found {}", sig.batch()));
    }
    const json& seconds = need(path, p, k, "seconds");
    if (!seconds.is_number() || !(seconds.get<double>() > 0.0) || !(seconds.get<double>() < kMaxSeconds)) {
      fail(path, p + "/seconds",
           fmt::format("expected a positive duration in seconds below {} (106 days), found {}", kMaxSeconds,
                       shown(seconds)));
    }
    db.add(sig, seconds.get<double>());
  }
  return db;
}

std::string profile_db_json(const sim::ProfileDb& db,
                            const std::vector<std::pair<std::string, std::string>>& provenance) {
  json doc = json::object();
  doc["format"] = "foresight-profile-db";
  doc["version"] = 1;
  doc["gpu"] = db.gpu;
  doc["source"] = db.source;
  doc["memory_timing"] = db.memory_timing == sim::MemoryTiming::copy ? "copy" : "kernel";
  json prov = json::object();
  for (const auto& [k, v] : provenance) prov[k] = v;
  doc["provenance"] = prov;
  json kernels = json::array();
  for (const auto& [sig, seconds] : db.entries()) {
    kernels.push_back(json{{"kernel", sig.kernel},
                           {"type", std::string(sim::to_string(sig.type))},
                           {"dtype", std::string(sim::to_string(sig.dtype))},
                           {"shape", sig.shape},
                           {"batch_axis", sig.batch_axis},
                           {"seconds", seconds}});
  }
  doc["kernels"] = kernels;
  return doc.dump(1) + "\n";
}

}  // namespace foresight::trace
