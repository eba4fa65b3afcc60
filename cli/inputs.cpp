#include "cli/inputs.hpp"

#include "cli/commands.hpp"
#include "traces/profile_db_json.hpp"

namespace foresight::cli {

void ScenarioFlags::add_to(CLI::App& cmd, bool with_batch_overrides) {
  if (with_batch_overrides) {
    cmd.add_option("--gpus", gpus,
                   "Override cluster.gpus (and plan.dp = gpus / (tp x pp x ep x cp), or gpus / (pp x ep x cp) with "
                   "expert_tp 1)")
        ->check(at_least(1));
    cmd.add_option("--micro-batch", micro_batch, "Override plan.micro_batch")->check(at_least(1));
  }
  if (with_batch_overrides) {
    cmd.add_option("--cluster", cluster,
                   "Run on this cluster: a preset (foresight --list) or a topology JSON file (sets cluster.preset or "
                   "cluster.topology)");
  }
  cmd.add_option("--set", sets, "Override any field: PATH=VALUE, e.g. plan.precision=amp_fp16 (repeatable)");
  cmd.add_option("--calibration", calibration, "Calibration file (default: validate/data/calibration.json)");
  cmd.add_option("--profile", profile, "Profile database of measured kernels (JSON; see README)");
  cmd.add_option("--prices", prices, "Prices and power per GPU model (default: run/data/prices.json)");
}

std::vector<strategy::Override> ScenarioFlags::overrides() const {
  std::vector<strategy::Override> parsed;
  for (const std::string& s : sets) parsed.push_back(strategy::parse_override(s));
  return strategy::scenario_overrides(cluster, gpus, micro_batch, parsed);
}

strategy::SimulationInputs ScenarioFlags::simulation_inputs() const {
  if (!files_) files_.emplace(strategy::InputPaths{calibration, profile, prices}, &trace::load_profile_db);
  return files_->inputs();
}

}  // namespace foresight::cli
