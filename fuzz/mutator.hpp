#pragma once
/// A seeded, deterministic byte mutator in the manner of libFuzzer's (bit and byte changes,
/// erased, inserted, copied and spliced ranges, dictionary tokens, numbers swapped for edge
/// values), without coverage feedback. It lets every build, gcc's included, fuzz the readers for a
/// bounded number of inputs: the `fuzz` suite's mutation test runs it in CI, where clang's
/// libFuzzer build (scripts/fuzz.sh) would not fit the time. The same seed gives the same inputs
/// on every run, so a finding reproduces from the test's seed and input number.

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace foresight::fuzz {

/// The tokens of a libFuzzer dictionary file's text: one quoted string per line, optionally
/// `name=` before it; `#` lines and blank lines are skipped; escapes \\, \" and \xNN. A line of
/// another form is a sim::ConfigError naming `origin` and the line number.
std::vector<std::string> parse_dictionary(std::string_view text, std::string_view origin);

class Mutator {
 public:
  /// `corpus`: the inputs mutated and spliced from (at least one; copied). `dictionary`: tokens
  /// inserted or written over the input. `max_size`: the longest input made.
  Mutator(std::uint64_t seed, std::vector<std::string> corpus, std::vector<std::string> dictionary,
          std::size_t max_size);

  /// The next input: a corpus element chosen at random with one to five mutations stacked.
  std::string next();

 private:
  std::size_t below(std::size_t n);  ///< uniform in [0, n), n > 0
  void mutate_once(std::string& s);
  void replace_number(std::string& s);

  std::mt19937_64 rng_;
  std::vector<std::string> corpus_;
  std::vector<std::string> dictionary_;
  std::size_t max_size_;
};

}  // namespace foresight::fuzz
