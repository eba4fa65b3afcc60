// Chakra execution traces (traces/chakra_et.hpp, traces/chakra_graph.hpp): the file format, ETs of
// other producers replayed by Chakra's conventions, and Foresight's own ETs read back into the
// graph they came from.
#include <catch2/catch.hpp>

#include <limits>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.hpp"
#include "exec/executor.hpp"
#include "run/simulation.hpp"
#include "topologies/cluster_builders.hpp"
#include "traces/chakra_graph.hpp"

using namespace foresight;
using trace::ChakraAttr;
using trace::ChakraNode;
using trace::ChakraNodeType;
using trace::ChakraTrace;

namespace {

std::string bytes_of(const ChakraTrace& t) {
  std::ostringstream os;
  trace::write_chakra_trace(os, t);
  return os.str();
}

ChakraNode comp(std::uint64_t id, std::uint64_t us, std::vector<std::uint64_t> deps = {}) {
  ChakraNode n;
  n.id = id;
  n.name = fmt::format("kernel{}", id);
  n.type = ChakraNodeType::comp;
  n.duration_micros = us;
  n.data_deps = std::move(deps);
  return n;
}

ChakraNode transfer(std::uint64_t id, bool send, int src, int dst, std::int64_t bytes, std::vector<std::uint64_t> deps = {}) {
  ChakraNode n;
  n.id = id;
  n.name = send ? "send" : "recv";
  n.type = send ? ChakraNodeType::comm_send : ChakraNodeType::comm_recv;
  n.attrs = {{"comm_src", std::int64_t{src}}, {"comm_dst", std::int64_t{dst}}, {"comm_tag", std::int64_t{7}}, {"comm_size", bytes}};
  n.data_deps = std::move(deps);
  return n;
}

ChakraTrace rank_trace(int r, std::vector<ChakraNode> nodes) {
  ChakraTrace t;
  t.path = fmt::format("test.{}.et", r);
  t.version = "0.0.4";
  t.nodes = std::move(nodes);
  return t;
}

sim::ExecutionResult run(const sim::ExecutionGraph& g, int gpus, sim::NetworkKind kind = sim::NetworkKind::analytical) {
  const topo::Cluster c = topo::resolve_cluster("dgx-a100", gpus);
  return sim::execute(g, c, sim::CollectiveConfig{}, kind);
}

}  // namespace

TEST_CASE("a Chakra ET survives writing and reading, every attribute type as written", "[chakra]") {
  ChakraTrace t = rank_trace(0, {comp(1, 5), comp(2, 7, {1})});
  t.metadata = {{"producer", std::string("test")}};
  t.nodes[0].attrs = {{"i", std::int64_t{-3}},
                      {"d", 2.5},
                      {"b", true},
                      {"s", std::string("x")},
                      {"il", std::vector<std::int64_t>{1, 2}},
                      {"dl", std::vector<double>{0.5}},
                      {"bl", std::vector<bool>{true, false}},
                      {"sl", std::vector<std::string>{"a", "b"}}};
  t.nodes[1].ctrl_deps = {1};
  t.nodes[1].start_time_micros = 5;
  const ChakraTrace back = trace::parse_chakra_trace(bytes_of(t), "mem");
  REQUIRE(back.version == "0.0.4");
  REQUIRE(back.nodes.size() == 2);
  REQUIRE(back.nodes[1].data_deps == std::vector<std::uint64_t>{1});
  REQUIRE(back.nodes[1].ctrl_deps == std::vector<std::uint64_t>{1});
  REQUIRE(back.nodes[1].start_time_micros == 5);
  REQUIRE(back.nodes[1].duration_micros == 7);
  REQUIRE(back.nodes[0].attrs.size() == 8);
  for (std::size_t i = 0; i < 8; ++i) {
    REQUIRE(back.nodes[0].attrs[i].name == t.nodes[0].attrs[i].name);
    REQUIRE(back.nodes[0].attrs[i].value == t.nodes[0].attrs[i].value);
  }
}

TEST_CASE("malformed Chakra files are errors naming the file and the message", "[chakra]") {
  const std::string good = bytes_of(rank_trace(0, {comp(1, 5), comp(2, 7, {1})}));
  // Truncated in the last node.
  REQUIRE_THROWS_WITH(trace::parse_chakra_trace(good.substr(0, good.size() - 2), "cut.0.et"),
                      Catch::Contains("cut.0.et: message 2 (node 1)") && Catch::Contains("truncated"));
  // A field the schema lacks (field 15, varint) inside a node.
  std::string odd = good;
  odd += std::string("\x02\x78\x01", 3);
  REQUIRE_THROWS_WITH(trace::parse_chakra_trace(odd, "odd.0.et"), Catch::Contains("odd.0.et: message 3") && Catch::Contains("another schema"));
  REQUIRE_THROWS_WITH(trace::parse_chakra_trace("", "empty.0.et"), Catch::Contains("empty file"));
  // Not a regular file.
  REQUIRE_THROWS_WITH(trace::read_chakra_trace("/dev/zero"), Catch::Contains("not a regular file"));
}

TEST_CASE("rank files are found by directory, prefix or one file, and must be complete", "[chakra]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "foresight-chakra-files-test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto touch = [&](const std::string& name) { std::ofstream(dir / name) << "x"; };
  touch("w.0.et");
  touch("w.1.et");
  touch("w.comm_groups.json");
  REQUIRE(trace::chakra_rank_files(dir.string()).size() == 2);
  REQUIRE(trace::chakra_rank_files((dir / "w").string()).size() == 2);
  REQUIRE(trace::chakra_rank_files((dir / "w.1.et").string()).front() == (dir / "w.0.et").string());
  REQUIRE(trace::is_chakra_path(dir.string()));
  touch("w.3.et");
  REQUIRE_THROWS_WITH(trace::chakra_rank_files(dir.string()), Catch::Contains("rank 2 missing"));
  fs::remove(dir / "w.3.et");
  touch("v.0.et");
  REQUIRE_THROWS_WITH(trace::chakra_rank_files(dir.string()), Catch::Contains("several prefixes"));
  REQUIRE(trace::chakra_rank_files((dir / "v").string()).size() == 1);
  fs::remove_all(dir);
}

TEST_CASE("an ET of another producer replays by Chakra's conventions", "[chakra]") {
  // Rank 0 computes 100 us, then sends 1 MB to rank 1, which receives it and computes 50 us;
  // both then all-reduce 8 MB over every rank (no pg_name).
  ChakraNode ar0;
  ar0.id = 10;
  ar0.name = "allreduce";
  ar0.type = ChakraNodeType::comm_coll;
  ar0.attrs = {{"comm_type", std::int64_t{0}}, {"comm_size", std::int64_t{8 << 20}}, {"rf_id", std::int64_t{3}}};
  ChakraNode ar1 = ar0;
  ar0.data_deps = {2};
  ar1.data_deps = {3};
  // Node ids out of order in the file: the importer sorts by dependencies.
  const std::vector<ChakraTrace> ranks{rank_trace(0, {ar0, comp(1, 100), transfer(2, true, 0, 1, 1 << 20, {1})}),
                                       rank_trace(1, {transfer(2, false, 0, 1, 1 << 20), comp(3, 50, {2}), ar1})};
  const trace::ChakraGraph g = trace::chakra_graph(ranks);
  REQUIRE_FALSE(g.foresight);
  REQUIRE(g.compute == 2);
  REQUIRE(g.collectives == 2);
  REQUIRE(g.transfers == 2);
  REQUIRE(g.unused_attrs.at("rf_id") == 2);
  REQUIRE(g.graph.communicators.size() == 1);
  REQUIRE(g.graph.communicators[0].ranks.size() == 2);
  const auto result = run(g.graph, 2);
  // Find each node by name and rank.
  const auto node = [&](std::string_view name, sim::RankId r) {
    for (std::size_t i = 0; i < g.graph.nodes.size(); ++i) {
      if (g.graph.names[g.graph.nodes[i].name] == name && g.graph.nodes[i].rank == r) return i;
    }
    FAIL("no node " << name);
    return std::size_t{0};
  };
  const std::size_t k0 = node("kernel1", 0);
  const std::size_t recv = node("recv", 1);
  const std::size_t k1 = node("kernel3", 1);
  REQUIRE(result.start[k0] == sim::Time::zero());
  REQUIRE(result.end[k0] == sim::Time::from_ps(100'000'000));
  // The receive ends after the send began; the kernel after it takes exactly its 50 us.
  REQUIRE(result.end[recv] > result.end[k0]);
  REQUIRE(result.start[k1] == result.end[recv]);
  REQUIRE(result.end[k1] - result.start[k1] == sim::Time::from_ps(50'000'000));
  // The all-reduce waits for both ranks and ends on both at once.
  REQUIRE(result.start[node("allreduce", 0)] >= result.end[k1]);
  REQUIRE(result.end[node("allreduce", 0)] == result.end[node("allreduce", 1)]);
}

TEST_CASE("numbers a Foresight ET names things by are checked, not passed to stoul or resize", "[chakra]") {
  // Issue 25 (fuzz/corpus/chakra/*.TraceError): std::stoul's invalid_argument escaped, and a
  // communicator "4000000000000" or host 2^32 - 1 resized a vector past memory.
  ChakraTrace t = rank_trace(0, {comp(1, 5)});
  t.metadata = {{"producer", std::string("foresight test")}, {"foresight.rank", std::int64_t{0}},
                {"foresight.gpu", std::int64_t{0}}, {"foresight.host", std::int64_t{0}}};
  t.nodes[0].attrs = {{"foresight.order", std::int64_t{0}}, {"foresight.kind", std::string("compute")}};
  REQUIRE(trace::chakra_graph({t}).foresight);
  for (const char* name : {"x", "4000000000000", "-1", ""}) {
    CAPTURE(name);
    const trace::ChakraGroups groups{{name, {0}}};
    trace::ChakraImportOptions in;
    in.groups = &groups;
    REQUIRE_THROWS_WITH(trace::chakra_graph({t}, in), Catch::Contains("comm group") && Catch::Contains("expected a number below 1"));
  }
  ChakraTrace bad = t;
  bad.metadata[3].value = std::int64_t{4294967295};
  REQUIRE_THROWS_WITH(trace::chakra_graph({bad}), Catch::Contains("foresight.host: expected a host thread 0-0"));
  bad = t;
  bad.metadata.push_back({"foresight.stream_names", std::vector<std::string>{"compute=1"}});
  REQUIRE_THROWS_WITH(trace::chakra_graph({bad}), Catch::Contains("foresight.stream_names") && Catch::Contains("\"compute\""));
  bad = t;
  bad.metadata.push_back({"foresight.send_matrix.99999999999", std::vector<double>{1.0}});
  REQUIRE_THROWS_WITH(trace::chakra_graph({bad}), Catch::Contains("foresight.send_matrix.99999999999") && Catch::Contains("below 1"));
  // Node attributes out of range: a negative time, a time past 10^6 s, bytes below 0 or not
  // finite, a stream, tag or layer that does not fit its field (issue 25: they were cast as found).
  struct BadAttr {
    const char* name;
    trace::ChakraValue value;
    const char* says;
  };
  for (const BadAttr& b : {BadAttr{"foresight.duration_ps", std::int64_t{-5}, "expected 0 to 1000000000000000000, found -5"},
                           BadAttr{"foresight.dispatch_ps", std::int64_t{2'000'000'000'000'000'000}, "found 2000000000000000000"},
                           BadAttr{"foresight.gil_ps", std::int64_t{-1}, "found -1"},
                           BadAttr{"foresight.bytes", -1.0, "expected a finite number >= 0, found -1"},
                           BadAttr{"foresight.bytes", std::numeric_limits<double>::infinity(), "found inf"},
                           BadAttr{"foresight.stream", std::int64_t{1} << 40, "expected 0 to 4294967295"},
                           BadAttr{"foresight.layer", std::int64_t{-2}, "expected -1 to 2147483647, found -2"}}) {
    CAPTURE(b.name, b.says);
    bad = t;
    bad.nodes[0].attrs.push_back({b.name, b.value});
    REQUIRE_THROWS_WITH(trace::chakra_graph({bad}), Catch::Contains(std::string("attribute \"") + b.name + "\"") &&
                                                        Catch::Contains(b.says) && Catch::Contains("node 1"));
  }
  // A kernel of another producer longer than sim::Time holds: Time::from_seconds threw InternalError.
  REQUIRE_THROWS_AS(trace::chakra_graph({rank_trace(0, {comp(1, std::uint64_t{1} << 63)})}), sim::TraceError);
  REQUIRE_THROWS_WITH(trace::chakra_graph({rank_trace(0, {comp(1, std::uint64_t{1} << 63)})}), Catch::Contains("sim::Time's range"));
}

TEST_CASE("Chakra's all-gather size is one rank's part; a kernel without a duration takes the roofline", "[chakra]") {
  ChakraNode ag;
  ag.id = 1;
  ag.name = "allgather";
  ag.type = ChakraNodeType::comm_coll;
  ag.attrs = {{"comm_type", std::int64_t{2}}, {"comm_size", std::int64_t{1000}}, {"pg_name", std::string("tp")}};
  ChakraNode k = comp(2, 0, {1});
  k.attrs = {{"num_ops", std::int64_t{1'000'000'000'000}}, {"tensor_size", std::int64_t{1'000'000}}};
  std::vector<ChakraTrace> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(rank_trace(r, {ag, k}));
  const trace::ChakraGroups groups{{"tp", {0, 1, 2, 3}}};
  trace::ChakraImportOptions in;
  in.groups = &groups;
  in.peak_flops = 312e12;
  in.memory_bandwidth = 2.039e12;
  const trace::ChakraGraph g = trace::chakra_graph(ranks, in);
  REQUIRE(g.roofline == 4);
  for (const sim::Node& n : g.graph.nodes) {
    if (n.kind == sim::OpKind::collective) REQUIRE(n.bytes == 4000.0);  // NCCL's whole buffer
    // max(1e12 / 312e12, 1e6 / 2.039e12) s = 3.2051 ms, rounded to the picosecond
    if (n.kind == sim::OpKind::compute) REQUIRE(n.duration == sim::Time::from_seconds(1e12 / 312e12));
  }
}

TEST_CASE("ETs that cannot be replayed are errors naming file and node", "[chakra]") {
  SECTION("a dependency on a missing node") {
    REQUIRE_THROWS_WITH(trace::chakra_graph({rank_trace(0, {comp(1, 5, {9})})}),
                        Catch::Contains("test.0.et: node 1") && Catch::Contains("names node 9"));
  }
  SECTION("a cycle") {
    REQUIRE_THROWS_WITH(trace::chakra_graph({rank_trace(0, {comp(1, 5, {2}), comp(2, 5, {1})})}), Catch::Contains("cycle"));
  }
  SECTION("a pg_name without a comm-group file") {
    ChakraNode c;
    c.id = 1;
    c.type = ChakraNodeType::comm_coll;
    c.attrs = {{"comm_type", std::int64_t{0}}, {"comm_size", std::int64_t{8}}, {"pg_name", std::string("dp")}};
    REQUIRE_THROWS_WITH(trace::chakra_graph({rank_trace(0, {c})}), Catch::Contains("pg_name \"dp\"") && Catch::Contains("--comm-groups"));
  }
  SECTION("a gather, which NCCL has not") {
    ChakraNode c;
    c.id = 1;
    c.type = ChakraNodeType::comm_coll;
    c.attrs = {{"comm_type", std::int64_t{3}}, {"comm_size", std::int64_t{8}}};
    REQUIRE_THROWS_WITH(trace::chakra_graph({rank_trace(0, {c})}), Catch::Contains("comm_type 3"));
  }
  SECTION("a collective without a size") {
    ChakraNode c;
    c.id = 1;
    c.type = ChakraNodeType::comm_coll;
    c.attrs = {{"comm_type", std::int64_t{0}}};
    REQUIRE_THROWS_WITH(trace::chakra_graph({rank_trace(0, {c})}), Catch::Contains("expected attribute comm_size"));
  }
  SECTION("a memory node") {
    ChakraNode c = comp(1, 0);
    c.type = ChakraNodeType::mem_load;
    REQUIRE_THROWS_WITH(trace::chakra_graph({rank_trace(0, {c})}), Catch::Contains("MEM_LOAD_NODE"));
  }
  SECTION("a send to itself") {
    REQUIRE_THROWS_WITH(trace::chakra_graph({rank_trace(0, {transfer(1, true, 0, 0, 8)})}), Catch::Contains("another of 0-0"));
  }
}

namespace {

/// Compiles and simulates `doc` unfolded, exports it, reads the bytes back and replays them:
/// the same graph must give the same run, bit for bit.
void round_trip(const nlohmann::json& doc, int gpus) {
  nlohmann::json d = doc;
  d["plan"]["fold"] = false;
  const strategy::Scenario s = strategy::parse_scenario(d, "roundtrip.json");
  strategy::SimulationInputs inputs;
  inputs.coalesce_kernels = false;  // an ET lists every kernel, as `simulate --chakra-out` compiles it
  const strategy::SimulationOutput out = strategy::simulate_scenario(s, inputs);
  trace::ChakraExportInfo info;
  info.producer = "test";
  info.network = std::string(sim::to_string(s.plan.network));
  info.comm_compute_slowdown_by_type = strategy::plan_comm_slowdowns(s.plan, out.cluster->gpu_model(0));
  info.comm_waits_for = strategy::plan_comm_waits(s.plan, out.cluster->gpu_model(0));
  info.comm_compute_slowdown_by_rank = strategy::plan_comm_slowdowns_by_rank(s.plan, *out.cluster, out.compiled.graph);
  info.comm_waits_for_by_rank = strategy::plan_comm_waits_by_rank(s.plan, *out.cluster, out.compiled.graph);
  const trace::ChakraExport x = trace::to_chakra(out.compiled.graph, out.result, info);
  REQUIRE(x.ranks.size() == static_cast<std::size_t>(gpus));
  std::vector<ChakraTrace> back;
  for (std::size_t r = 0; r < x.ranks.size(); ++r) back.push_back(trace::parse_chakra_trace(bytes_of(x.ranks[r]), fmt::format("rt.{}.et", r)));
  const trace::ChakraGroups groups = x.groups;
  trace::ChakraImportOptions in;
  in.groups = &groups;
  const trace::ChakraGraph g = trace::chakra_graph(back, in);
  REQUIRE(g.foresight);
  REQUIRE(g.unused_attrs.empty());
  const sim::ExecutionGraph& a = out.compiled.graph;
  const sim::ExecutionGraph& b = g.graph;
  REQUIRE(b.nodes.size() == a.nodes.size());
  REQUIRE(b.rank_gpu == a.rank_gpu);
  REQUIRE(b.rank_host == a.rank_host);
  REQUIRE(b.host_process == a.host_process);
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    INFO("node " << i);
    REQUIRE(b.nodes[i].kind == a.nodes[i].kind);
    REQUIRE(b.nodes[i].rank == a.nodes[i].rank);
    REQUIRE(b.nodes[i].stream == a.nodes[i].stream);
    REQUIRE(b.nodes[i].duration == a.nodes[i].duration);
    REQUIRE(b.nodes[i].dispatch == a.nodes[i].dispatch);
    REQUIRE(b.nodes[i].bytes == a.nodes[i].bytes);
    auto da = a.nodes[i].deps.to_vector();
    auto db = b.nodes[i].deps.to_vector();
    std::sort(da.begin(), da.end());
    std::sort(db.begin(), db.end());
    REQUIRE(db == da);
    REQUIRE(b.names[b.nodes[i].name] == a.names[a.nodes[i].name]);
  }
  const topo::Cluster cluster = topo::resolve_cluster(s.cluster.spec, s.cluster.gpus);
  sim::ExecutorOptions options;
  options.comm_compute_slowdown = g.comm_compute_slowdown;
  options.comm_compute_slowdown_by_type = g.comm_compute_slowdown_by_type;
  options.comm_waits_for = g.comm_waits_for;
  options.comm_compute_slowdown_by_rank = g.comm_compute_slowdown_by_rank;
  options.comm_waits_for_by_rank = g.comm_waits_for_by_rank;
  REQUIRE(g.comm_compute_slowdown_by_rank == info.comm_compute_slowdown_by_rank);
  REQUIRE(g.comm_waits_for_by_rank == info.comm_waits_for_by_rank);
  if (info.comm_compute_slowdown_by_rank.empty()) {
    REQUIRE(g.comm_compute_slowdown_by_type == info.comm_compute_slowdown_by_type);
    REQUIRE(g.comm_waits_for == info.comm_waits_for);
  }
  const sim::ExecutionResult r = sim::execute(b, cluster, sim::CollectiveConfig{}, s.plan.network, options);
  const sim::ExecutionResult r0 = sim::execute(a, cluster, sim::CollectiveConfig{}, s.plan.network, options);
  REQUIRE(r.makespan == r0.makespan);
  REQUIRE(r.fingerprint == r0.fingerprint);
  // The replay is the simulation it was exported from, contention included.
  REQUIRE(r.makespan == out.result.makespan);
  // The ETs' schedule is the simulated one, in whole microseconds.
  REQUIRE(g.recorded_s.has_value());
  REQUIRE(*g.recorded_s == Approx(trace::replayed_span(g, out.result)).margin(1e-12));
}

}  // namespace

TEST_CASE("Foresight's ETs read back into the graph they came from: a 3D-parallel GPT", "[chakra]") {
  round_trip({{"model", {{"name", "gpt3-125m"}, {"seq_len", 256}}},
              {"cluster", {{"preset", "dgx-a100"}, {"gpus", 16}}},
              {"plan", {{"tp", 2}, {"pp", 2}, {"dp", 4}, {"micro_batch", 1}, {"global_batch", 16}, {"precision", "amp_bf16"},
                        {"optimizer", "adam"}, {"zero", 1}, {"network", "flow"}, {"steps", 1}}},
              {"workload", {{"steps", 1}}}},
             16);
}

TEST_CASE("Foresight's ETs read back into the graph they came from: H100 data parallel, with measured contention",
          "[chakra]") {
  // The kernels slow by their family's measured factor while the all-reduces run: the ETs carry
  // the factors and each kernel's family, so the replay slows the same kernels by as much.
  const nlohmann::json doc = {{"model", {{"name", "gpt3-125m"}, {"seq_len", 256}}},
                              {"cluster", {{"preset", "dgx-h100"}, {"gpus", 4}}},
                              {"plan", {{"dp", 4}, {"micro_batch", 2}, {"precision", "amp_bf16"}, {"optimizer", "adam"},
                                        {"network", "flow"}, {"steps", 1}}},
                              {"workload", {{"steps", 1}}}};
  REQUIRE(strategy::plan_comm_slowdowns(strategy::parse_scenario(doc, "h100.json").plan,
                                        topo::find_gpu_spec("H100-SXM5-80GB"))[0] > 0.0);
  round_trip(doc, 4);
}

TEST_CASE("Foresight's ETs read back into the graph they came from: a mixed A100 and H100 cluster", "[chakra]") {
  // Each rank's ET records its own GPU's factors: the H100 ranks' kernels slow, the A100 ranks'
  // do not, in the replay as in the simulation.
  const char* data = std::getenv("FORESIGHT_TEST_DATA");
  const std::string topology = std::string(data != nullptr ? data : "tests/data") + "/topologies/mixed-a100-h100.json";
  const nlohmann::json doc = {{"model", {{"name", "gpt3-125m"}, {"seq_len", 256}}},
                              {"cluster", {{"topology", topology}}},
                              {"plan", {{"dp", 8}, {"micro_batch", 2}, {"precision", "amp_bf16"}, {"optimizer", "adam"},
                                        {"network", "flow"}, {"steps", 1}}},
                              {"workload", {{"steps", 1}}}};
  round_trip(doc, 8);
}

TEST_CASE("Foresight's ETs read back into the graph they came from: GPipe, one process driving 4 GPUs", "[chakra]") {
  // The ThetaGPU GPipe example on 4 GPUs: a single process's host thread drives every stage.
  const char* root = std::getenv("FORESIGHT_SOURCE_ROOT");
  REQUIRE(root != nullptr);
  std::ifstream in(std::string(root) + "/examples/thetagpu-resnet18-gpipe.json");
  nlohmann::json doc = nlohmann::json::parse(in);
  doc.erase("measured");
  doc["cluster"]["gpus"] = 4;
  doc["plan"]["pp"] = 4;
  doc["plan"]["global_batch"] = 16;
  doc["workload"] = {{"steps", 1}};
  round_trip(doc,
             4);
}
