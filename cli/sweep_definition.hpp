#pragma once
/// What `foresight sweep` runs, independent of where it runs (threads on one machine, one shard of
/// a Slurm job array, the ranks of an MPI job): the options as given, the sweep they define
/// (configurations, columns and the run of one configuration: run/sweep.hpp), a fingerprint that
/// tells one sweep from another, and a result as an MPI message.

#include <cstddef>
#include <string>
#include <vector>

#include "cli/inputs.hpp"
#include "run/sweep.hpp"

namespace foresight::cli {

using Shard = strategy::SweepShard;

/// "I/N" with 0 <= I < N; ConfigError saying what was expected otherwise (N/N is taken for a
/// 1-based index and named as such).
Shard parse_shard(const std::string& text);

/// `foresight sweep` as the user asked for it.
struct SweepOptions {
  std::string scenario;
  std::string gpus;
  std::string micro_batch;
  std::vector<std::string> vary;
  ScenarioFlags flags;
  std::string csv = "sweep.csv";
  std::string plot;
  bool resume = false;
  bool force = false;
  /// --csv was passed (a named file may be rewritten; the default may not).
  bool csv_given = false;
  int jobs = 0;            ///< threads on this machine; 0: all cores
  std::string shard_text;  ///< --shard I/N as given; empty: the whole sweep
  bool mpi = false;        ///< --mpi: spread over the ranks of an MPI job
};

/// A sweep (run/sweep.hpp's, shared with the Python module) and what tells it from another when
/// its parts run apart (shards, MPI ranks).
struct SweepDefinition : strategy::SweepDefinition {
  /// 16 hex digits hashing everything that decides the rows: the scenario file's bytes, the
  /// overrides, the dimensions and the calibration, price and profile files' bytes (not their
  /// paths, so shards run on machines that mount them elsewhere still merge).
  std::string fingerprint;

  /// "foresight sweep resnet50.json": the plot's title.
  std::string title() const;
};

/// The sweep of `o`; ConfigError for a malformed --vary or list, or nothing to vary.
SweepDefinition make_sweep_definition(const SweepOptions& o);

/// A result as bytes and back, exactly (MPI messages): every string length-prefixed.
std::string encode_result(const strategy::ConfigResult& r);
/// InternalError when `bytes` is not what encode_result made.
strategy::ConfigResult decode_result(const std::string& bytes);

}  // namespace foresight::cli
