// The fuzz corpus as a regression test of every build (no clang needed): each file of
// fuzz/corpus/<target>/ goes through the same entry function as the libFuzzer executable
// fuzz_<target> (fuzz/targets.hpp). Only Foresight's user-facing errors may come out. A file
// named NAME.<ErrorClass> (a minimized finding) must end in that error class, NAME.ok must be
// read without one; seeds (other names) may do either.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "fuzz/targets.hpp"
#include "tests/test_files.hpp"
#include "tests/test_paths.hpp"

using namespace foresight;

namespace {

/// The outcome a file's name asks for: an error class, "" for NAME.ok, "any" for a seed.
std::string expected_outcome(const std::filesystem::path& p) {
  const std::string ext = p.extension().string();
  if (ext == ".ok") return "";
  for (const char* kind : {"ConfigError", "TopologyError", "ModelError", "TraceError", "GraphError"}) {
    if (ext == std::string(".") + kind) return kind;
  }
  return "any";
}

}  // namespace

TEST_CASE("every fuzz corpus file ends in a result or a user-facing error, the one its name states", "[fuzz]") {
  const std::filesystem::path corpus = test::source_path("fuzz/corpus");
  std::size_t files = 0;
  for (const fuzz::FuzzTarget& target : fuzz::fuzz_targets()) {
    const std::filesystem::path dir = corpus / std::string(target.name);
    REQUIRE(std::filesystem::is_directory(dir));
    std::vector<std::filesystem::path> inputs;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.is_regular_file()) inputs.push_back(e.path());
    }
    std::sort(inputs.begin(), inputs.end());
    CHECK_FALSE(inputs.empty());
    for (const auto& p : inputs) {
      INFO(p.string());
      const std::string input = test::slurp(p);
      std::string outcome;
      REQUIRE_NOTHROW(outcome = fuzz::fuzz_outcome(target, input));
      const std::string expected = expected_outcome(p);
      if (expected != "any") CHECK(outcome == expected);
      ++files;
    }
  }
  REQUIRE(files > 0);
}

TEST_CASE("the Chakra target splits its input into comm groups and ranks", "[fuzz]") {
  const auto& chakra = fuzz::fuzz_target("chakra");
  // Comm groups that are not an object: the groups' ConfigError, before any rank is read.
  REQUIRE(fuzz::fuzz_outcome(chakra, std::string("[1]") + std::string(fuzz::kChakraSeparator)) == "ConfigError");
  // No separator: one rank's ET; an empty one is a TraceError naming the file.
  REQUIRE(fuzz::fuzz_outcome(chakra, "") == "TraceError");
  REQUIRE_THROWS_AS(fuzz::fuzz_target("no-such-target"), sim::InternalError);
}
