#pragma once
/// What a front end (the `foresight` command, the Python module) turns its scenario arguments
/// into, so that both read them one way: the scenario (a file, or a document already in memory),
/// the overrides in the command's order (--cluster, --gpus, --micro-batch, then each --set), and
/// the simulation inputs read from the calibration, price and profile files.

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exec/profile_db.hpp"
#include "run/prices.hpp"
#include "run/scenario.hpp"
#include "run/simulation.hpp"

namespace foresight::strategy {

/// A scenario file, or a document given in memory (a Python dict).
struct ScenarioSource {
  /// The file; for a document, the name messages give it ("<dict>", "BASE_DIR/<dict>"), whose
  /// folder its relative paths (model.hf_config, cluster.topology, ...) resolve against.
  std::string path;
  /// The document; none: the file is read at each load, so that a missing or malformed file
  /// fails where a load does, with the reader's message.
  std::optional<nlohmann::json> doc;
};

/// The document of `source` (the file read, or the one given) with `overrides` applied.
nlohmann::json scenario_document(const ScenarioSource& source, const std::vector<Override>& overrides);
/// The scenario read and checked: load_scenario(path, overrides) for a file, parse_scenario of
/// the edited document otherwise.
Scenario load_scenario(const ScenarioSource& source, const std::vector<Override>& overrides);

/// The overrides of --cluster, --gpus and --micro-batch, in that order, then `sets`. `cluster` is
/// a preset (cluster.preset) or a topology file (cluster.topology, made absolute: it is given
/// relative to where the command runs, not to the scenario file); empty: not given. gpus and
/// micro_batch of 0 are not given.
std::vector<Override> scenario_overrides(const std::string& cluster, int gpus, int micro_batch,
                                         const std::vector<Override>& sets);

/// The files a simulation reads besides the scenario; empty: the stored calibration, the stored
/// prices, no profile database.
struct InputPaths {
  std::string calibration;
  std::string profile;
  std::string prices;
};

/// Reads a profile database file: traces/profile_db_json.hpp's load_profile_db, passed in by the
/// caller because run/ sits below traces/ (scripts/check_layering.py).
using ProfileLoader = sim::ProfileDb (*)(const std::string& path);

/// SimulationInputs with what they point to: the collective calibration, the price table and the
/// profile database, read in that order (so that the first bad file is the one reported). Copies
/// and moves keep inputs() valid: the table and the database are shared, not owned per copy.
class InputFiles {
 public:
  InputFiles(const InputPaths& paths, ProfileLoader load_profiles);
  const SimulationInputs& inputs() const { return inputs_; }

 private:
  std::shared_ptr<const PriceTable> prices_;
  std::shared_ptr<const sim::ProfileDb> profiles_;
  SimulationInputs inputs_;
};

}  // namespace foresight::strategy
