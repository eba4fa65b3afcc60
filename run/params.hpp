#pragma once
/// Every scenario key, declared once (the parameter table): its section, type, unit, default,
/// allowed range or choices and a one-line doc. From this one table come
/// - scenario reading: the keys each section accepts (any other is rejected) and the reading and
///   range check of every plain value (run/scenario.cpp adds what relates keys to each other);
/// - `--set PATH=VALUE`: a path the table does not know is refused before the file is read;
/// - the effective plan that `simulate --json` echoes;
/// - `foresight params` and docs/reference.md (a test keeps the file equal to params_markdown()).

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/json_reader.hpp"
#include "run/scenario.hpp"

namespace foresight::strategy {

enum class ParamKind : std::uint8_t {
  integer,  ///< a JSON integer in [lo, hi]
  number,   ///< a JSON number in [lo, hi] (lo excluded when lo_open)
  boolean,
  choice,   ///< one of `choices`
  bytes,    ///< a size with its unit: "25 MiB"
  time,     ///< a duration with its unit: "8 us"
  text,     ///< a string
  path,     ///< a file path, relative to the scenario file
  list,     ///< a JSON array
  object,   ///< a JSON object of its own keys (their section is this key's path)
};
std::string_view to_string(ParamKind k);

/// A value read from a scenario: integers and choice indices as long long.
using ParamValue = std::variant<long long, double, bool, std::string, sim::Bytes, sim::Time>;

struct Param {
  std::string_view section;  ///< "model", "cluster", "plan", "plan.moe_routing", "workload"
  std::string_view key;
  ParamKind kind = ParamKind::text;
  std::string_view unit;          ///< what a number counts ("samples", "GPUs"); empty if none
  std::string_view default_text;  ///< the default, or how it is derived
  double lo = 0.0;                ///< integer and number ranges
  double hi = 0.0;
  bool lo_open = false;
  std::span<const std::string_view> choices;
  std::string_view doc;
  /// Stores a value read and range-checked from a scenario. nullptr where run/scenario.cpp reads
  /// the key itself (a choice of zoo names, a list or a distribution, alternatives).
  void (*store)(Scenario&, const ParamValue&) = nullptr;
  /// The effective value as `simulate --json` prints it; nullptr where it is not echoed.
  nlohmann::json (*echo)(const Scenario&) = nullptr;

  std::string path() const;  ///< "plan.micro_batch"
};

/// The whole table, in the order of the reference.
std::span<const Param> scenario_params();
/// The entry of `section`.`key`, or nullptr.
const Param* find_param(std::string_view section, std::string_view key);
/// The keys `section` accepts, in table order.
std::vector<std::string_view> section_keys(std::string_view section);

/// Checks that `obj` is an object of `section`'s keys (a ConfigError naming the unknown key
/// otherwise) and stores every key present that has a store function, each checked against its
/// kind and range.
void read_section(const topo::JsonReader& r, const nlohmann::json& obj, const topo::JsonPath& p,
                  std::string_view section, std::string_view what, Scenario& s);
/// The value of one key as read by read_section (for keys scenario.cpp reads itself).
ParamValue read_value(const topo::JsonReader& r, const nlohmann::json& obj, const topo::JsonPath& p,
                      const Param& param, std::string_view what);

/// ConfigError unless `path` ("plan.tp") names a key of the table; the message lists the
/// section's keys.
void check_param_path(const std::string& path);

/// The echoed keys of `section` with their effective values.
nlohmann::json section_to_json(const Scenario& s, std::string_view section);

/// `foresight params`: the table as aligned text (one key per line and its doc).
std::string params_text();
/// docs/reference.md.
std::string params_markdown();
/// The table as JSON (`foresight params --json`).
nlohmann::json params_json();

}  // namespace foresight::strategy
