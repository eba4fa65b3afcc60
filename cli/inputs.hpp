#pragma once
// The flags every scenario-running command shares: overrides (--gpus, --micro-batch, --set),
// the collective calibration and the profile database. Their meaning (the overrides' order and
// forms, which files are read) is run/scenario_inputs.hpp's, shared with the Python module.

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "run/scenario_inputs.hpp"

namespace foresight::cli {

class ScenarioFlags {
 public:
  /// Registers --gpus, --micro-batch, --set, --calibration and --profile on `cmd`.
  void add_to(CLI::App& cmd, bool with_batch_overrides = true);
  /// The overrides the flags ask for, in a fixed order: --cluster, --gpus, --micro-batch, then each
  /// --set.
  std::vector<strategy::Override> overrides() const;
  /// Collective calibration (stored or --calibration), prices (stored or --prices) and the
  /// profile database (--profile), read on the first call.
  strategy::SimulationInputs simulation_inputs() const;

  int gpus = 0;

  std::string cluster;  ///< --cluster: a preset name or a topology file
  int micro_batch = 0;
  std::vector<std::string> sets;
  std::string calibration;
  std::string profile;
  std::string prices;  ///< price file; empty: the stored one

 private:
  mutable std::optional<strategy::InputFiles> files_;
};

}  // namespace foresight::cli
