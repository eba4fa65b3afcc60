#pragma once
/// The bookkeeping of one sweep on the process that writes its results (the only process of a
/// threaded sweep or a shard; rank 0 of an MPI job): the checks made before anything runs, the
/// rows an earlier run left (--resume), the live file that receives each row as it finishes, and
/// the finished file, rewritten in configuration order so that it does not depend on which
/// thread or rank ran what.

#include <cstddef>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cli/sweep_definition.hpp"
#include "cli/sweep_table.hpp"

namespace foresight::cli {

class SweepSession {
 public:
  /// Checks what needs no simulation (--plot, an existing default file), reads the rows already
  /// in the file (--resume), loads every configuration still to run and the simulation inputs, and
  /// only then opens the live file: a bad input throws ConfigError naming it and leaves no file.
  SweepSession(const SweepOptions& o, const SweepDefinition& def);

  /// The configurations still to run, in order.
  const std::vector<std::size_t>& todo() const { return todo_; }
  /// The calibration, prices and profiles, loaded once and shared read-only by the runs.
  const strategy::SimulationInputs& inputs() const { return inputs_; }
  /// Stores configuration `config`'s result, appends its row to the live file and prints a
  /// progress line. Safe to call from several threads.
  void record(std::size_t config, const strategy::ConfigResult& result);
  /// Rewrites the file in configuration order, prints the summary (and writes the plot); returns
  /// the exit status: 1 when a configuration failed (its row carries the error), else 0.
  int finish();

 private:
  void read_earlier_rows();
  void open_live_file();
  bool mine(std::size_t config) const { return !shard_ || shard_->owns(config); }

  const SweepOptions& options_;
  const SweepDefinition& def_;
  std::optional<Shard> shard_;
  std::string
      csv_;  ///< the file written: --csv, or for a shard without --csv sweep-shard-I-of-N.csv
  std::map<std::size_t, std::vector<std::string>>
      earlier_;                       ///< rows kept by --resume, by configuration
  bool earlier_ends_cleanly_ = true;  ///< the file read by --resume ends with a line end
  std::vector<std::size_t> todo_;
  strategy::SimulationInputs inputs_;

  struct Outcome {
    bool ran = false;
    bool oom = false;
    double iteration_s = 0.0;
  };
  std::mutex mu_;  ///< guards what record() changes
  std::vector<std::vector<std::string>> rows_;
  std::vector<Outcome> outcomes_;
  std::size_t finished_ = 0;
  std::ofstream live_;
};

}  // namespace foresight::cli
