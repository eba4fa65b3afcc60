#pragma once
// Running the foresight binary from the CLI tests: its output and exit status, and scratch paths.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/wait.h>

namespace foresight::test {

struct Run {
  int status = -1;
  std::string out;  ///< stdout and stderr together
};

/// Runs a shell command line, in folder `dir` when given, and captures its output (stdout and
/// stderr together) and exit status.
inline Run shell_in(const std::string& dir, const std::string& command) {
  Run r;
  const std::string cd = dir.empty() ? std::string() : "cd " + dir + " && ";
  FILE* p = popen((cd + command + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) r.out += buf.data();
  const int raw = pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

/// Runs `foresight <args>` through the shell, in folder `dir` when given.
inline Run run_foresight_in(const std::string& dir, const std::string& args) {
  const char* exe = std::getenv("FORESIGHT_EXE");
  REQUIRE(exe != nullptr);
  return shell_in(dir, std::string(exe) + " " + args);
}

inline Run run_foresight(const std::string& args) { return run_foresight_in("", args); }

inline std::string scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "foresight-cli-test";
  std::filesystem::create_directories(dir);
  const auto p = dir / name;
  std::filesystem::remove(p);
  return p.string();
}

}  // namespace foresight::test
