#pragma once
/// The fuzz targets of Foresight's input readers, shared by the libFuzzer executables
/// (fuzz/fuzz_*.cpp, built with -Dfuzz=enabled and clang) and the corpus regression test
/// (tests/fuzz/fuzz_corpus_test.cpp, every build). Each target reads one input the way the CLI
/// reads that kind of file, from memory. A sim::Error other than sim::InternalError is the
/// expected outcome of bad input; anything else escaping (another exception, an InternalError)
/// or a crash or sanitizer report is a finding.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace foresight::fuzz {

/// A scenario document (run/scenario.hpp): parsed, checked, its step count and plan derived.
void fuzz_scenario(std::string_view input);
/// A topology file (topologies/topology_json.hpp): parsed, built, exported and read back (the
/// export of a valid cluster must load again: an error there is an InternalError).
void fuzz_topology(std::string_view input);
/// A profile database (traces/profile_db_json.hpp): parsed, then every measurement looked up.
void fuzz_profile_db(std::string_view input);
/// A Kineto trace's JSON text (traces/kineto.hpp), then the GPU ops of its steps.
void fuzz_kineto(std::string_view input);
/// A compressed or archived Kineto trace: gzip data (.json.gz, .tar.gz) decompressed, then
/// its tar members or its text read as traces; input that is not gzip is read as a tar archive.
void fuzz_kineto_archive(std::string_view input);
/// Chakra ETs (traces/chakra_et.hpp) turned into a graph (traces/chakra_graph.hpp) and checked
/// as replay checks it before running it (exec/graph_check.hpp, on a DGX A100). The input is
/// a comm-group JSON document and up to kMaxChakraRanks per-rank ETs, each section preceded by
/// kChakraSeparator; an input without the separator is one rank's ET and no comm groups.
void fuzz_chakra(std::string_view input);

/// A PyTorch execution trace's JSON text (traces/pytorch_et.hpp) turned into a graph
/// (traces/pytorch_et_graph.hpp, kernels timed by an A100's roofline) and checked as replay
/// checks it (exec/graph_check.hpp).
void fuzz_pytorch_et(std::string_view input);

inline constexpr std::string_view kChakraSeparator = "\n--FORESIGHT-RANK--\n";
inline constexpr std::size_t kMaxChakraRanks = 8;

struct FuzzTarget {
  std::string_view name;  ///< the fuzz/corpus/<name>/ folder and the fuzz_<name> executable
  void (*run)(std::string_view input);
};

/// Every target, in a fixed order.
std::span<const FuzzTarget> fuzz_targets();
/// The target named `name`; sim::InternalError when there is none.
const FuzzTarget& fuzz_target(std::string_view name);

/// Runs `target` on `input`: the class name of the sim::Error it threw ("ConfigError",
/// "TopologyError", "ModelError", "TraceError", "GraphError", "Error"), or "" when it read the
/// input; `message`, when given, receives the error's text ("" when it read the input).
/// sim::InternalError and every other exception propagate.
std::string fuzz_outcome(const FuzzTarget& target, std::string_view input, std::string* message = nullptr);

/// libFuzzer's entry: runs target `name` on the bytes; always 0 (findings escape as exceptions,
/// which end the process).
int fuzz_one(std::string_view name, const std::uint8_t* data, std::size_t size);

}  // namespace foresight::fuzz
