// foresight: the command-line front end. Only this file catches Foresight's errors: it prints
// one message and exits non-zero.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.hpp"
#include "common/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Foresight: a discrete-event simulator of distributed deep-learning training on GPU clusters"};
  app.require_subcommand(0, 1);
  bool list = false;
  app.add_flag("--list", list, "List the model zoo, network models, collective algorithms, cluster presets, GPU models and link "
                               "classes with their defaults");
  foresight::cli::Runner run;
  foresight::cli::add_simulate_command(app, run);
  foresight::cli::add_sweep_command(app, run);
  foresight::cli::add_sweep_merge_command(app, run);
  foresight::cli::add_plan_command(app, run);
  foresight::cli::add_replay_command(app, run);
  foresight::cli::add_import_profile_command(app, run);
  foresight::cli::add_topology_command(app, run);
  foresight::cli::add_collective_command(app, run);
  foresight::cli::add_validate_command(app, run);
  foresight::cli::add_params_command(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A usage error: one line, then where to look, and exit status 2.
    fmt::print(stderr, "foresight: error: {}\nRun with --help for the options.\n", e.what());
    return 2;
  }
  try {
    if (list) {
      std::fputs(foresight::cli::list_text().c_str(), stdout);
      return 0;
    }
    if (!run) {
      std::fputs(app.help().c_str(), stdout);
      return 2;
    }
    return run();
  } catch (const foresight::sim::Error& e) {
    fmt::print(stderr, "foresight: error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "foresight: internal error: {}\n", e.what());
    return 70;
  }
}
