// The README's five-minute tour, run as a new user would: every `build/cli/foresight` command of its
// sh block, exactly as written, from a scratch folder that sees the repository's examples/ (so the
// files the tour writes land there, not in the checkout). `plan` and `validate` are left to their
// own tests (cli/sweep's planner case and validate/foresight_validate, each over 20 s alone).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <string>
#include <vector>

#include "tests/cli/cli_run.hpp"
#include "tests/test_paths.hpp"

namespace {

namespace fs = std::filesystem;

/// The `build/cli/foresight ...` commands of the sh block under "## A five-minute tour",
/// backslash continuations joined.
std::vector<std::string> tour_commands() {
  std::ifstream in(foresight::test::source_path("README.md"));
  REQUIRE(in);
  std::vector<std::string> out;
  std::string line, pending;
  bool in_tour = false, in_block = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_tour = line == "## A five-minute tour";
    if (!in_tour) continue;
    if (line == "```sh") {
      in_block = true;
      continue;
    }
    if (in_block && line == "```") break;
    if (!in_block || line.empty() || line[0] == '#') continue;
    const bool continues = line.back() == '\\';
    pending += continues ? line.substr(0, line.size() - 1) : line;
    if (!continues) {
      out.push_back(pending);
      pending.clear();
    }
  }
  return out;
}

}  // namespace

TEST_CASE("the README's tour runs as written", "[cli][tour]") {
  const auto commands = tour_commands();
  REQUIRE(commands.size() >= 9);
  const fs::path dir = fs::temp_directory_path() / "foresight-cli-test" / "tour";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_directory_symlink(foresight::test::source_path("examples"), dir / "examples");
  const std::string prefix = "build/cli/foresight ";
  int ran = 0;
  for (const std::string& command : commands) {
    INFO(command);
    REQUIRE(command.rfind(prefix, 0) == 0);
    const std::string args = command.substr(prefix.size());
    if (args.rfind("plan ", 0) == 0 || args.rfind("validate", 0) == 0) continue;
    const auto r = foresight::test::run_foresight_in(dir.string(), args);
    INFO(r.out);
    REQUIRE(r.status == 0);
    const std::string& out = r.out;
    REQUIRE_FALSE(out.empty());
    ++ran;
  }
  REQUIRE(ran >= 7);
  // What the tour says it writes.
  for (const char* file : {"mb.csv", "sweep.csv", "sweep.svg", "1f1b.trace.json"}) {
    INFO(file);
    REQUIRE(fs::file_size(dir / file) > 0);
  }
  // The micro-batch sweep's iterations, to 4 significant digits, are the ones the tour's comment
  // quotes ("rows: iteration 29.99 s, 15.28 s, 9.961 s, 9.472 s").
  std::ifstream csv(dir / "mb.csv");
  std::string row;
  std::getline(csv, row);  // header: micro_batch,iteration_time_s,...
  std::vector<std::string> iterations;
  while (std::getline(csv, row)) {
    const auto first = row.find(',');
    std::ostringstream s;
    s << std::setprecision(4) << std::stod(row.substr(first + 1, row.find(',', first + 1) - first - 1));
    iterations.push_back(s.str());
  }
  REQUIRE(iterations == std::vector<std::string>{"29.99", "15.28", "9.961", "9.472"});
}
