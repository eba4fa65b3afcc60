#include "run/scenario_inputs.hpp"

#include <filesystem>

#include "common/json_reader.hpp"
#include "run/calibration.hpp"
#include "topologies/cluster_builders.hpp"

namespace foresight::strategy {

nlohmann::json scenario_document(const ScenarioSource& source, const std::vector<Override>& overrides) {
  nlohmann::json doc = source.doc ? *source.doc : topo::JsonReader(source.path, sim::ErrorKind::config).parse_file();
  apply_overrides(doc, overrides);
  return doc;
}

Scenario load_scenario(const ScenarioSource& source, const std::vector<Override>& overrides) {
  if (!source.doc) return load_scenario(source.path, overrides);
  return parse_scenario(scenario_document(source, overrides), source.path);
}

std::vector<Override> scenario_overrides(const std::string& cluster, int gpus, int micro_batch,
                                         const std::vector<Override>& sets) {
  std::vector<Override> out;
  if (!cluster.empty()) {
    const bool preset = topo::is_cluster_preset(cluster);
    out.push_back({preset ? "cluster.preset" : "cluster.topology",
                   nlohmann::json(preset ? cluster : std::filesystem::absolute(cluster).string()).dump()});
  }
  if (gpus > 0) out.push_back({"cluster.gpus", std::to_string(gpus)});
  if (micro_batch > 0) out.push_back({"plan.micro_batch", std::to_string(micro_batch)});
  out.insert(out.end(), sets.begin(), sets.end());
  return out;
}

InputFiles::InputFiles(const InputPaths& paths, ProfileLoader load_profiles) {
  const run::Calibration calibration =
      run::load_calibration(paths.calibration.empty() ? run::default_calibration_path() : paths.calibration);
  inputs_.collectives = run::collective_config(calibration.collectives);
  inputs_.megatron_2021_gemm_efficiency = calibration.megatron.gemm_efficiency;
  prices_ = std::make_shared<const PriceTable>(load_prices(paths.prices.empty() ? default_prices_path() : paths.prices));
  inputs_.prices = prices_.get();
  if (!paths.profile.empty()) {
    profiles_ = std::make_shared<const sim::ProfileDb>(load_profiles(paths.profile));
    inputs_.profiles = profiles_.get();
  }
}

}  // namespace foresight::strategy
