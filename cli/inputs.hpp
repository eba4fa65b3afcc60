#pragma once
// The flags every scenario-running command shares: overrides (--gpus, --micro-batch, --set),
// the collective calibration and the profile database.

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "exec/profile_db.hpp"
#include "run/scenario.hpp"
#include "run/simulation.hpp"

namespace foresight::cli {

class ScenarioFlags {
 public:
  /// Registers --gpus, --micro-batch, --set, --calibration and --profile on `cmd`.
  void add_to(CLI::App& cmd, bool with_batch_overrides = true);
  /// The overrides the flags ask for, in a fixed order: --gpus, --micro-batch, then each --set.
  std::vector<strategy::Override> overrides() const;
  /// Collective calibration (stored or --calibration) and the profile database (--profile).
  strategy::SimulationInputs simulation_inputs() const;

  int gpus = 0;

  std::string cluster;  ///< --cluster: a preset name or a topology file
  int micro_batch = 0;
  std::vector<std::string> sets;
  std::string calibration;
  std::string profile;
  std::string prices;  ///< price file; empty: the stored one

 private:
  mutable std::shared_ptr<const sim::ProfileDb> profiles_;
  mutable std::shared_ptr<const strategy::PriceTable> price_table_;
};

}  // namespace foresight::cli
