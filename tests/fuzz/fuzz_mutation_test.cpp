// CI's fuzz step: every reader's fuzz target (fuzz/targets.hpp) run on inputs mutated from its
// corpus (fuzz/corpus/<target>/) with its dictionary (fuzz/<target>.dict) by the seeded mutator
// (fuzz/mutator.hpp), a bounded number per target, in every build. Only Foresight's user-facing
// errors may come out; an InternalError, another exception or a crash is a finding. Coverage-guided
// fuzzing for longer runs is scripts/fuzz.sh (clang's libFuzzer).
//
// FORESIGHT_FUZZ_TARGET=NAME runs one reader only (Meson runs each reader as its own test);
// FORESIGHT_FUZZ_RUNS=N sets the inputs per target (default kDefaultRuns); FORESIGHT_FUZZ_WRITE=N
// writes input number N of each target to fuzz-input-<target>-N in the working directory (a
// crash's message names the target and number), to reproduce or minimize it.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "fuzz/mutator.hpp"
#include "fuzz/targets.hpp"
#include "tests/test_files.hpp"
#include "tests/test_paths.hpp"

using namespace foresight;

namespace {

constexpr std::size_t kDefaultRuns = 1000;
constexpr std::uint64_t kSeed = 0x5eedf00d;

std::size_t env_count(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return static_cast<std::size_t>(std::stoull(v));
}

/// The longest input per target: scripts/fuzz.sh's -max_len, a few times the largest seed.
std::size_t max_size(std::string_view target) {
  if (target == "scenario") return 8192;
  if (target == "topology" || target == "kineto" || target == "pytorch_et") return 16384;
  if (target == "chakra") return 65536;
  return 32768;  // profile_db, kineto_archive
}

fuzz::Mutator mutator_for(const fuzz::FuzzTarget& target, std::size_t index) {
  std::vector<std::string> corpus;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(test::source_path("fuzz/corpus/" + std::string(target.name)))) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());  // the directory's order is the file system's: fix it
  for (const auto& f : files) corpus.push_back(test::slurp(f));
  REQUIRE_FALSE(corpus.empty());
  const std::string dict_path = test::source_path("fuzz/" + std::string(target.name) + ".dict");
  std::vector<std::string> dict = fuzz::parse_dictionary(test::slurp(dict_path), dict_path);
  REQUIRE_FALSE(dict.empty());
  return fuzz::Mutator(kSeed + index, std::move(corpus), std::move(dict), max_size(target.name));
}

}  // namespace

TEST_CASE("mutated inputs of every reader end in a result or a user-facing error", "[fuzz]") {
  const std::size_t runs = env_count("FORESIGHT_FUZZ_RUNS", kDefaultRuns);
  const std::size_t write = env_count("FORESIGHT_FUZZ_WRITE", static_cast<std::size_t>(-1));
  // FORESIGHT_FUZZ_TARGET=NAME runs one reader (Meson runs each as its own test).
  const char* only = std::getenv("FORESIGHT_FUZZ_TARGET");
  const auto targets = fuzz::fuzz_targets();
  int ran = 0;
  for (std::size_t t = 0; t < targets.size(); ++t) {
    const fuzz::FuzzTarget& target = targets[t];
    if (only != nullptr && *only != '\0' && target.name != std::string_view(only)) continue;
    ++ran;
    fuzz::Mutator m = mutator_for(target, t);
    std::set<std::string> checks;  // the errors' texts without their numbers: which checks refused
    std::set<std::size_t> hashes;
    for (std::size_t n = 0; n < runs; ++n) {
      const std::string input = m.next();
      hashes.insert(std::hash<std::string>{}(input));
      if (n == write) std::ofstream(fmt::format("fuzz-input-{}-{}", target.name, n), std::ios::binary) << input;
      INFO("fuzz target " << target.name << ", input number " << n << " (FORESIGHT_FUZZ_WRITE=" << n
                          << " writes it), " << input.size() << " bytes");
      try {
        std::string message;
        const std::string kind = fuzz::fuzz_outcome(target, input, &message);
        std::erase_if(message, [](char c) { return c >= '0' && c <= '9'; });
        checks.insert(kind + ": " + message);
      } catch (const std::exception& e) {
        const std::string path = fmt::format("fuzz-finding-{}-{}", target.name, n);
        std::ofstream(path, std::ios::binary) << input;
        FAIL("a finding: " << e.what() << " (the input is in " << std::filesystem::absolute(path).string() << ")");
      }
    }
    // The mutator made varied inputs, and they reached many of the reader's checks: a mutator
    // that returned its seeds unchanged, or inputs all refused by the JSON syntax check, would not.
    CAPTURE(target.name, checks.size());
    CHECK(hashes.size() > runs / 2);
    CHECK(checks.size() >= std::min<std::size_t>(runs / 50, 10));
  }
  REQUIRE(ran > 0);  // a FORESIGHT_FUZZ_TARGET that names no reader is an error, not a pass
}

TEST_CASE("the mutator is deterministic, bounded and uses its dictionary", "[fuzz]") {
  const std::vector<std::string> corpus{"{\"a\": 12, \"b\": [1, 2]}", "[]"};
  fuzz::Mutator a(7, corpus, {"TOKEN"}, 40);
  fuzz::Mutator b(7, corpus, {"TOKEN"}, 40);
  fuzz::Mutator c(8, corpus, {"TOKEN"}, 40);
  bool differs = false;
  bool token = false;
  bool edge_number = false;
  for (int i = 0; i < 2000; ++i) {
    const std::string x = a.next();
    REQUIRE(x == b.next());
    differs = differs || x != c.next();
    REQUIRE(x.size() <= 40);
    token = token || x.find("TOKEN") != std::string::npos;
    edge_number = edge_number || x.find("1e400") != std::string::npos || x.find("9223372036854775808") != std::string::npos;
  }
  CHECK(differs);
  CHECK(token);
  CHECK(edge_number);
  REQUIRE_THROWS_AS(fuzz::Mutator(1, {}, {}, 10), sim::InternalError);
}

TEST_CASE("dictionaries are read as libFuzzer writes them, and a bad line names its file and line", "[fuzz]") {
  const auto tokens = fuzz::parse_dictionary("# comment\n\n\"{\"\nkw=\"a\\\"b\"\n  \"\\x00\\xff\\\\\"\r\n", "d.dict");
  REQUIRE(tokens.size() == 3);
  CHECK(tokens[0] == "{");
  CHECK(tokens[1] == "a\"b");
  CHECK(tokens[2] == std::string("\0\xff\\", 3));
  REQUIRE_THROWS_WITH(fuzz::parse_dictionary("\"ok\"\nnot quoted\n", "d.dict"),
                      Catch::Matchers::Contains("d.dict: line 2"));
  REQUIRE_THROWS_AS(fuzz::parse_dictionary("\"bad \\q\"", "d.dict"), sim::ConfigError);
  // Every dictionary the project ships reads.
  for (const fuzz::FuzzTarget& t : fuzz::fuzz_targets()) {
    const std::string p = test::source_path("fuzz/" + std::string(t.name) + ".dict");
    CHECK_FALSE(fuzz::parse_dictionary(test::slurp(p), p).empty());
  }
}

TEST_CASE("every reader's mutation run is its own Meson test", "[fuzz]") {
  // tests/meson.build lists the readers for FORESIGHT_FUZZ_TARGET; a reader missing there would
  // never be mutated in CI.
  const std::string meson = test::slurp(test::source_path("tests/meson.build"));
  const auto at = meson.find("foreach target : [");
  REQUIRE(at != std::string::npos);
  const std::string list = meson.substr(at, meson.find(']', at) - at);
  for (const fuzz::FuzzTarget& t : fuzz::fuzz_targets()) {
    INFO(t.name);
    CHECK(list.find(fmt::format("'{}'", t.name)) != std::string::npos);
  }
}
