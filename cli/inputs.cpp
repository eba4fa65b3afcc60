#include "cli/inputs.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "topologies/cluster_builders.hpp"

#include "cli/commands.hpp"

#include "traces/profile_db_json.hpp"
#include "run/calibration.hpp"

namespace foresight::cli {

void ScenarioFlags::add_to(CLI::App& cmd, bool with_batch_overrides) {
  if (with_batch_overrides) {
    cmd.add_option("--gpus", gpus, "Override cluster.gpus (and plan.dp = gpus / (tp x pp x ep))")->check(at_least(1));
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
  std::vector<strategy::Override> out;
  if (!cluster.empty()) {
    const bool preset = topo::is_cluster_preset(cluster);
    // A topology file is given relative to where foresight runs, not to the scenario file.
    out.push_back({preset ? "cluster.preset" : "cluster.topology",
                   nlohmann::json(preset ? cluster : std::filesystem::absolute(cluster).string()).dump()});
  }
  if (gpus > 0) out.push_back({"cluster.gpus", std::to_string(gpus)});
  if (micro_batch > 0) out.push_back({"plan.micro_batch", std::to_string(micro_batch)});
  for (const std::string& s : sets) out.push_back(strategy::parse_override(s));
  return out;
}

strategy::SimulationInputs ScenarioFlags::simulation_inputs() const {
  strategy::SimulationInputs in;
  in.collectives = run::collective_config(
      run::load_calibration(calibration.empty() ? run::default_calibration_path() : calibration).collectives);
  if (!price_table_) {
    price_table_ = std::make_shared<const strategy::PriceTable>(
        strategy::load_prices(prices.empty() ? strategy::default_prices_path() : prices));
  }
  in.prices = price_table_.get();
  if (!profile.empty()) {
    if (!profiles_) profiles_ = std::make_shared<const sim::ProfileDb>(trace::load_profile_db(profile));
    in.profiles = profiles_.get();
  }
  return in;
}

}  // namespace foresight::cli
