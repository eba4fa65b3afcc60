#pragma once
/// The `foresight` subcommands. Each add_* registers one on `app`; when it is chosen, its
/// callback stores the work to run in `run`, which main executes inside the one place that
/// catches Foresight's errors.

#include <CLI/CLI.hpp>
#include <ostream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/atomic_file.hpp"

namespace foresight::cli {

using Runner = std::function<int()>;

void add_topology_command(CLI::App& app, Runner& run);
void add_collective_command(CLI::App& app, Runner& run);
void add_validate_command(CLI::App& app, Runner& run);
void add_simulate_command(CLI::App& app, Runner& run);
void add_sweep_command(CLI::App& app, Runner& run);
void add_sweep_merge_command(CLI::App& app, Runner& run);
void add_replay_command(CLI::App& app, Runner& run);
void add_import_profile_command(CLI::App& app, Runner& run);
void add_params_command(CLI::App& app, Runner& run);
void add_plan_command(CLI::App& app, Runner& run);

/// The text of `foresight --list`: every registry with its entries, units and defaults.
std::string list_text();

/// A CLI11 check that an integer option is at least `min`, with a message that says so.
CLI::Validator at_least(long min);
/// `text` read whole as a decimal integer, or nullopt.
std::optional<long> whole_integer(const std::string& text);
/// The items of a comma-separated flag value ("1,2,4"); ConfigError naming `flag` for an empty
/// list or an empty item.
std::vector<std::string> comma_list(const std::string& flag, const std::string& text);

/// The outputs of one command. A file is written in full when it is emitted (sim::PendingFile,
/// under no name yet) and all of them are put in place together by commit(), after the last was
/// written: a command that fails half way, or is interrupted, leaves none of its files, not even
/// those it had finished. Standard output (a path that is empty or "-") is printed at once.
class Outputs {
 public:
  Outputs() = default;
  Outputs(const Outputs&) = delete;
  Outputs& operator=(const Outputs&) = delete;
  /// Discards whatever was not committed.
  ~Outputs();

  /// `text` for `path`, or for standard output.
  void emit(const std::string& path, const std::string& text);
  /// The same for output made in pieces (a trace): streamed to standard output or to the file.
  void emit(const std::string& path, const std::function<void(std::ostream&)>& write);
  /// Another output staged beside its target (a directory of files): `put` moves it in place at
  /// commit; `discard` removes it when the command ends without committing.
  void stage(std::function<void()> put, std::function<void()> discard);
  /// Puts every staged output in place, in the order emitted.
  void commit();

 private:
  struct Staged {
    std::optional<sim::PendingFile> file;
    std::function<void()> put;
    std::function<void()> discard;
  };
  std::vector<Staged> staged_;
};

/// A command's one output: `text` to `path` (atomically) or to standard output.
void emit(const std::string& path, const std::string& text);

}  // namespace foresight::cli
