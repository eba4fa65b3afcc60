#include "fuzz/targets.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "exec/graph_check.hpp"
#include "run/scenario.hpp"
#include "topologies/cluster_builders.hpp"
#include "topologies/topology_json.hpp"
#include "traces/chakra_et.hpp"
#include "traces/chakra_graph.hpp"
#include "traces/kineto.hpp"
#include "traces/profile_db_json.hpp"
#include "traces/pytorch_et.hpp"
#include "traces/pytorch_et_graph.hpp"

namespace foresight::fuzz {
namespace {

/// Origins name an input the way a file path would; relative paths inside a scenario resolve
/// against the working directory.
constexpr const char* kOrigin = "fuzz-input.json";

/// An A100's BF16 peak and HBM bandwidth (topologies/gpu_spec.cpp's catalog), for the roofline
/// estimate of Chakra nodes without a duration.
constexpr double kPeakFlops = 312e12;
constexpr double kMemoryBandwidth = 1555e9;

/// Steps whose GPU ops the Kineto target collects: a bound on its work per input.
constexpr std::size_t kMaxKinetoSteps = 4;

/// The most text the archive target decompresses (the CLI allows 4 GiB; a fuzzer's gzip bomb
/// must stay within libFuzzer's memory limit, and the mutation test's 1000 inputs, many of them
/// the corpus's 68 MB bomb mutated, within a minute: at 64 MiB that test took 38-51 s, its time
/// in growing the text) and the most members it parses. Every seed's text is under 16 kB.
constexpr std::size_t kMaxArchiveText = std::size_t{8} << 20;
constexpr std::size_t kMaxArchiveMembers = 8;

/// sim::Time's range in seconds (9.2e18 ps, common/units.cpp).
constexpr double kMaxSeconds = 9.2e6;

}  // namespace

void fuzz_scenario(std::string_view input) {
  const nlohmann::json doc = topo::JsonReader(kOrigin, sim::ErrorKind::config).parse(input);
  const strategy::Scenario s = strategy::parse_scenario(doc, kOrigin);
  // The simulation counts steps in tokens with global_batch x seq_len; 2048 stands for a length.
  s.total_steps(2048);
  strategy::plan_to_json(s.plan).dump();
}

void fuzz_topology(std::string_view input) {
  const topo::Cluster c = topo::parse_topology(input, kOrigin, "fuzz");
  const std::string exported = topo::topology_to_string(c);
  try {
    const topo::Cluster back = topo::parse_topology(exported, "exported", "fuzz");
    if (back.device_count() != c.device_count() || back.link_count() != c.link_count()) {
      throw sim::InternalError(fmt::format("exported topology reads back with {} devices and {} links, not {} and {}",
                                           back.device_count(), back.link_count(), c.device_count(), c.link_count()));
    }
  } catch (const sim::InternalError&) {
    throw;
  } catch (const sim::Error& e) {
    throw sim::InternalError(fmt::format("a topology's export does not read back: {}", e.what()));
  }
}

void fuzz_profile_db(std::string_view input) {
  const sim::ProfileDb db = trace::parse_profile_db(input, kOrigin);
  // A database the reader accepts gives each kernel at a measured batch a duration sim::Time
  // holds, and at any other batch a positive finite one.
  const auto duration = [](std::optional<double> s, double most) {
    if (!s) throw sim::InternalError("a measured kernel is not found by its own signature");
    if (!(*s > 0.0 && *s < most)) throw sim::InternalError(fmt::format("a looked-up duration of {} s", *s));
  };
  for (const auto& [sig, seconds] : db.entries()) {
    duration(db.lookup(sig), kMaxSeconds);
    // Below, between and above the measured batches: interpolation and extrapolation.
    if (sig.batch_axis >= sig.shape.size()) continue;
    const std::int64_t batch = sig.shape[sig.batch_axis];
    const std::int64_t above = batch < (std::int64_t{1} << 62) ? batch * 2 + 1 : batch;
    for (const std::int64_t other_batch : {std::int64_t{1}, batch / 2 + 1, above}) {
      sim::OpSignature other = sig;
      other.shape[other.batch_axis] = other_batch;
      duration(db.lookup(other), std::numeric_limits<double>::infinity());
    }
  }
}

void fuzz_kineto(std::string_view input) {
  const trace::KinetoTrace t = trace::parse_kineto(std::string(input), kOrigin);
  for (std::size_t i = 0; i < std::min(t.steps.size(), kMaxKinetoSteps); ++i) t.gpu_ops_in(t.steps[i]);
  if (!t.steps.empty()) t.step_at(-1);
}

void fuzz_kineto_archive(std::string_view input) {
  // gzip data (by its magic bytes) is decompressed first, as .gz, .tar.gz and .tgz files are;
  // then, as load_kineto_files does for archives, its tar members are read, or its text is
  // one trace. Input without the gzip magic is taken as an uncompressed tar, so that the tar
  // reader is reached without a valid gzip wrapper around every mutation.
  const bool gz = input.size() >= 2 && static_cast<unsigned char>(input[0]) == 0x1f &&
                  static_cast<unsigned char>(input[1]) == 0x8b;
  const std::string text = gz ? trace::gunzip(input, "fuzz-input.tar.gz", kMaxArchiveText) : std::string(input);
  const bool tar = text.size() >= 512 && std::string_view(text).substr(257, 5) == "ustar";
  if (gz && !tar) {
    fuzz_kineto(text);
    return;
  }
  const auto members = trace::tar_json_members(text, gz ? "fuzz-input.tar.gz" : "fuzz-input.tar");
  for (std::size_t i = 0; i < std::min(members.size(), kMaxArchiveMembers); ++i) fuzz_kineto(members[i].second);
}

void fuzz_chakra(std::string_view input) {
  std::vector<std::string_view> sections;
  for (std::size_t at = 0;;) {
    const std::size_t next = input.find(kChakraSeparator, at);
    sections.push_back(input.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at));
    if (next == std::string_view::npos) break;
    at = next + kChakraSeparator.size();
  }
  trace::ChakraGroups groups;
  trace::ChakraImportOptions options;
  options.peak_flops = kPeakFlops;
  options.memory_bandwidth = kMemoryBandwidth;
  std::vector<trace::ChakraTrace> ranks;
  if (sections.size() == 1) {
    ranks.push_back(trace::parse_chakra_trace(std::string(input), "fuzz.0.et"));
  } else {
    if (!sections[0].empty()) {
      groups = trace::parse_chakra_groups(sections[0], "fuzz.comm_groups.json");
      options.groups = &groups;
    }
    for (std::size_t r = 1; r < sections.size() && r <= kMaxChakraRanks; ++r) {
      ranks.push_back(trace::parse_chakra_trace(std::string(sections[r]), fmt::format("fuzz.{}.et", r - 1)));
    }
  }
  const trace::ChakraGraph g = trace::chakra_graph(ranks, options);
  // What replay does next (cli/replay_chakra.cpp): ranks on GPUs the cluster has, then the
  // executor's check of the graph. The cluster is built once: it is only read.
  static const topo::Cluster cluster = topo::resolve_cluster("dgx-a100", static_cast<int>(kMaxChakraRanks));
  for (const sim::GpuId gpu : g.graph.rank_gpu) {
    if (gpu >= cluster.gpu_count()) return;  // replay's ConfigError
  }
  sim::check_graph(g.graph, cluster);
}

void fuzz_pytorch_et(std::string_view input) {
  const trace::PytorchEt et = trace::parse_pytorch_et(std::string(input), kOrigin);
  trace::EtGraphOptions options;
  options.kernel_time = [](const sim::OpSignature& s) {
    return sim::Time::from_seconds(std::min(1.0, std::max(s.flops / kPeakFlops, s.bytes / kMemoryBandwidth)));
  };
  const trace::EtGraph g = trace::pytorch_et_graph({et}, options);
  // Replay's cluster is sized to the groups: a lone ET standing for more GPUs than a fuzz
  // cluster holds is the ConfigError replay would give.
  static const topo::Cluster cluster = topo::resolve_cluster("dgx-a100", 8);
  if (g.stands_for > static_cast<int>(cluster.gpu_count())) return;
  sim::check_graph(g.graph, cluster);
}

std::span<const FuzzTarget> fuzz_targets() {
  static constexpr std::array<FuzzTarget, 7> kTargets{{
      {"scenario", fuzz_scenario},
      {"topology", fuzz_topology},
      {"profile_db", fuzz_profile_db},
      {"kineto", fuzz_kineto},
      {"kineto_archive", fuzz_kineto_archive},
      {"chakra", fuzz_chakra},
      {"pytorch_et", fuzz_pytorch_et},
  }};
  return kTargets;
}

const FuzzTarget& fuzz_target(std::string_view name) {
  for (const FuzzTarget& t : fuzz_targets()) {
    if (t.name == name) return t;
  }
  throw sim::InternalError(fmt::format("no fuzz target named \"{}\"", name));
}

std::string fuzz_outcome(const FuzzTarget& target, std::string_view input, std::string* message) {
  const auto outcome = [&](const sim::Error& e, const char* kind) {
    if (message != nullptr) *message = e.what();
    return std::string(kind);
  };
  if (message != nullptr) message->clear();
  try {
    target.run(input);
  } catch (const sim::InternalError&) {
    throw;
  } catch (const sim::ConfigError& e) {
    return outcome(e, "ConfigError");
  } catch (const sim::TopologyError& e) {
    return outcome(e, "TopologyError");
  } catch (const sim::ModelError& e) {
    return outcome(e, "ModelError");
  } catch (const sim::TraceError& e) {
    return outcome(e, "TraceError");
  } catch (const sim::GraphError& e) {
    return outcome(e, "GraphError");
  } catch (const sim::Error& e) {
    return outcome(e, "Error");
  }
  return "";
}

int fuzz_one(std::string_view name, const std::uint8_t* data, std::size_t size) {
  // libFuzzer passes a null pointer for the empty input.
  const std::string_view input = size == 0 ? std::string_view() : std::string_view(reinterpret_cast<const char*>(data), size);
  fuzz_outcome(fuzz_target(name), input);
  return 0;
}

}  // namespace foresight::fuzz
