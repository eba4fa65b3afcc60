#pragma once
/// The core of a sweep, the same wherever it runs (`foresight sweep` on threads, a shard of a
/// Slurm job array, the ranks of an MPI job; foresight.sweep() in Python): every combination of
/// the dimensions' values in a fixed order (the first dimension outermost), the CSV's result
/// columns, the check of every configuration before any runs, one configuration simulated into
/// its row, and the threads that run a list of configurations. Files, resuming, shards, MPI and
/// printing are the front ends'.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "run/scenario_inputs.hpp"

namespace foresight::strategy {

/// One shard of a sweep cut into `count`: the configurations whose index i has
/// i % count == index (round-robin, so that every shard gets its share of the large GPU counts,
/// which come last along the --gpus axis). `index` counts from 0, as SLURM_ARRAY_TASK_ID does with
/// --array=0-(count-1). `foresight sweep --shard I/N` and foresight.sweep(shard=(I, N)) use it.
struct SweepShard {
  std::size_t index = 0;
  std::size_t count = 1;

  bool owns(std::size_t config) const { return config % count == index; }
  bool operator==(const SweepShard&) const = default;
};

/// The result columns after the dimensions' columns, in CSV order; "error" is always last.
const std::vector<std::string>& sweep_result_columns();

/// One axis of a sweep: its CSV column, the override path it sets and the values' override texts.
struct SweepDimension {
  std::string column;
  std::string path;
  std::vector<std::string> values;
};

/// A sweep: every combination of the dimensions' values, the first dimension outermost.
struct SweepDefinition {
  ScenarioSource scenario;                 ///< the scenario file as given, or a document
  std::vector<Override> shared;            ///< applied before each configuration's overrides
  std::vector<SweepDimension> dims;
  std::vector<std::vector<std::string>> configs;  ///< one value per dimension, in sweep order
  std::vector<std::string> header;                ///< dimension columns, then sweep_result_columns()

  /// The scenario overrides of configuration `i`: the shared ones, then one per dimension.
  std::vector<Override> overrides(std::size_t i) const;
  /// "gpus=8 micro_batch=64": configuration `i` as progress lines and errors name it.
  std::string describe(std::size_t i) const;
  /// Configuration `i` as an index into each dimension's values (two equal values stay apart).
  std::vector<std::size_t> value_indices(std::size_t i) const;
};

/// The sweep of `scenario` over `dims` (each with at least one value), `shared` applied first.
SweepDefinition make_sweep(ScenarioSource scenario, std::vector<Override> shared, std::vector<SweepDimension> dims);

/// Reads and checks each configuration in `which`, in order, without simulating: a typo in a list
/// fails the sweep at once, naming the configuration ("sweep configuration gpus=8
/// micro_batch=64: ..."), instead of surfacing as an error row after hours of work.
void check_configurations(const SweepDefinition& def, const std::vector<std::size_t>& which);

/// One configuration's outcome.
struct ConfigResult {
  std::vector<std::string> row;  ///< the CSV fields: configuration values, then sweep_result_columns()
  std::string summary;           ///< "iteration 12.3 ms" or "error: ...", for the progress line
  bool ran = false;              ///< simulated without error
  bool oom = false;
  double iteration_s = 0.0;
};

/// Simulates configuration `i`. A Foresight error (a plan the strategies cannot run) becomes the
/// row's error column, as a result, not an exception. Numbers are formatted as the CSV writes
/// them (9 significant digits); fields that do not apply are empty.
ConfigResult run_configuration(const SweepDefinition& def, std::size_t i, const SimulationInputs& inputs);

/// Runs the configurations `todo` on `jobs` threads of this process (0: one per core), handing
/// each result to `record` from the thread that ran it. An exception other than a Foresight error
/// (a bug) is rethrown here once every thread has stopped.
void run_on_threads(const SweepDefinition& def, const std::vector<std::size_t>& todo, const SimulationInputs& inputs,
                    int jobs, const std::function<void(std::size_t, const ConfigResult&)>& record);

}  // namespace foresight::strategy
