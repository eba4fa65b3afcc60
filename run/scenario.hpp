#pragma once
/// Scenario files: one JSON document with four parts (docs/architecture.md, "Scenario files"):
///   { "description": "...",                                   (optional)
///     "model":    {"name": "resnet18-cifar", "classes": 100} | {"hf_config": "path", "seq_len": 2048},
///     "cluster":  {"preset": "thetagpu", "gpus": 8} | {"topology": "path/topology.json"},
///     "plan":     {"dp": 8, "micro_batch": 128, ...},          (see Plan; quantities with units)
///     "workload": {"epochs": 10, "dataset_samples": 50000} | {"steps": 100} | {"tokens": 2e12} }
/// Unknown keys are rejected. Relative paths are relative to the scenario file. Overrides
/// ("plan.micro_batch=64") edit the document before it is read, so they are checked the same way.

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "strategies/plan.hpp"

namespace foresight::strategy {

struct ModelSpec {
  std::string name;       ///< a zoo model, or empty with hf_config
  std::string hf_config;  ///< path of a Hugging Face config.json
  int classes = 0;        ///< CNN classifier size (0: the model's default)
  int seq_len = 0;        ///< transformer sequence length (0: the model's default)
};

struct ClusterSpec {
  std::string spec;  ///< a preset name or a topology file path
  int gpus = 0;      ///< 0: the preset's default
};

struct Workload {
  int epochs = 0;
  std::int64_t dataset_samples = 0;
  std::int64_t steps = 0;  ///< optimizer steps, when not given as epochs
  std::int64_t tokens = 0;  ///< tokens to train on, when given instead (models with a sequence)
};

/// The measured run a scenario reproduces, when it names one: what `simulate` sets its prediction
/// against.
enum class MeasuredRole : std::uint8_t { calibration, prediction };
struct Measured {
  bool present = false;
  double run_s = 0.0;        ///< the whole workload's measured time; 0 when only iteration_s is given
  double iteration_s = 0.0;  ///< one iteration's measured time; 0 when only run_s is given
  MeasuredRole role = MeasuredRole::prediction;
  std::string source;
};

struct Scenario {
  std::string path;
  std::string description;
  ModelSpec model;
  ClusterSpec cluster;
  Plan plan;
  Workload workload;
  Measured measured;
  /// Optimizer steps of the workload: steps; or epochs x ceil(dataset_samples / global_batch);
  /// or ceil(tokens / tokens_per_step), tokens_per_step being global_batch x the model's sequence
  /// length (ConfigError naming /workload/tokens when the model has none, tokens_per_step <= 0).
  std::int64_t total_steps(std::int64_t tokens_per_step = 0) const;
};

/// One "dotted.path=value" edit. The value is read as JSON when it parses (numbers, true,
/// "quoted strings"), else taken as a string ("25 MiB").
struct Override {
  std::string path;
  std::string value;
};
/// Parses "plan.tp=8" (ConfigError naming the flag otherwise).
Override parse_override(const std::string& text);

/// Applies `overrides` to a scenario document. Setting cluster.preset drops cluster.topology and
/// the reverse. Setting cluster.gpus also sets plan.dp to
/// gpus / (tp x pp x ep) when the plan has no explicit dp override.
void apply_overrides(nlohmann::json& doc, const std::vector<Override>& overrides);

/// Reads and checks a scenario. ConfigError (ModelError for models) naming the file, the JSON
/// pointer, what was expected and what was found: unknown keys, wrong types, negative or zero
/// batches, dp x tp x pp x ep different from the cluster's GPUs, a global batch that the micro
/// batch and data parallelism do not divide, plan values the strategies cannot run yet.
Scenario load_scenario(const std::string& path, const std::vector<Override>& overrides = {});
Scenario parse_scenario(const nlohmann::json& doc, const std::string& origin);

/// The effective plan, as --json prints it.
nlohmann::json plan_to_json(const Plan& plan);

}  // namespace foresight::strategy
