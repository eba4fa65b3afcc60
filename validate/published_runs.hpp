#pragma once
/// Training runs that others measured and published (papers, logbooks, framework performance
/// tables), each described exactly by a scenario file beside the dataset
/// (validate/data/published_runs.json). A run's measured iteration time is the source's own
/// figure or one derived from it by the arithmetic its entry writes out (e.g. tokens per second
/// per GPU to seconds per iteration). Prediction: `foresight simulate` of the scenario with the
/// project's defaults, no constant fitted on the dataset. The dataset lists its sources once and
/// every run names one, so that the suite can count independent sources.

#include <map>
#include <string>
#include <vector>

#include "run/simulation.hpp"
#include "validate/calibration.hpp"

namespace foresight::validate {

struct PublishedSource {
  std::string citation;  ///< authors, title, venue; the table or section
  std::string url;
};

struct PublishedRun {
  std::string id;
  std::string source;    ///< a key of PublishedRuns::sources
  std::string scenario;  ///< absolute path
  std::string reported;  ///< the source's figure as it states it
  std::string derivation;  ///< how measured_iteration_s follows from it
  double measured_iteration_s = 0.0;
  std::string note;
  Role role = Role::prediction;
};

struct PublishedRuns {
  std::string description;
  std::map<std::string, PublishedSource> sources;
  std::vector<PublishedRun> runs;
};

/// Reads the dataset; ConfigError naming file, pointer, expected and found otherwise (unknown
/// keys, a run naming an unlisted source, a missing scenario file, a non-positive time, a
/// repeated id).
PublishedRuns load_published_runs(const std::string& path);

struct PublishedResult {
  const PublishedRun* run = nullptr;
  double predicted_s = 0.0;
  std::string note;  ///< the simulated configuration in brief
};

/// Simulates every run's scenario.
std::vector<PublishedResult> evaluate_published_runs(const PublishedRuns& d, const strategy::SimulationInputs& inputs);

}  // namespace foresight::validate
