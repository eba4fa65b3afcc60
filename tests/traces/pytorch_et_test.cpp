// PyTorch execution traces (traces/pytorch_et.hpp, traces/pytorch_et_graph.hpp): both layouts
// read alike, bad traces refused with their node, and an ET's iteration derived by hand, host ET
// (costed from shapes) and host+device ET (recorded times) alike.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.hpp"
#include "exec/executor.hpp"
#include "topologies/cluster_builders.hpp"
#include "traces/kineto.hpp"
#include "traces/pytorch_et.hpp"
#include "traces/pytorch_et_graph.hpp"
#include "traces/pytorch_et_ops.hpp"

using namespace foresight;
using nlohmann::json;
using trace::EtGraph;
using trace::PytorchEt;

namespace {

std::string data(const std::string& rel) {
  const char* d = std::getenv("FORESIGHT_TEST_DATA");
  return std::string(d != nullptr ? d : "tests/data") + "/" + rel;
}

json attrs(int rf, int tid, int scope, json extra = json::array()) {
  json a = json::array({{{"name", "rf_id"}, {"type", "uint64"}, {"value", rf}},
                        {{"name", "scope"}, {"type", "uint64"}, {"value", scope}},
                        {{"name", "tid"}, {"type", "uint64"}, {"value", tid}}});
  for (const json& e : extra) a.push_back(e);
  return a;
}

json args(json values, json shapes, json types) { return {{"values", values}, {"shapes", shapes}, {"types", types}}; }

/// A node of the 1.0.2+ layout.
json node(int id, const std::string& name, int parent, json inputs = args(json::array(), json::array(), json::array()),
          json outputs = args(json::array(), json::array(), json::array()), int scope = 0, int tid = 1, json extra = json::array()) {
  return {{"id", id}, {"name", name}, {"ctrl_deps", parent}, {"inputs", inputs}, {"outputs", outputs}, {"attrs", attrs(id, tid, scope, extra)}};
}

json roots() {
  return json::array({node(1, "[pytorch|profiler|execution_trace|process]", 1, args(json::array(), json::array(), json::array()),
                           args(json::array(), json::array(), json::array()), 7, 0),
                      node(2, "[pytorch|profiler|execution_trace|thread]", 1, args(json::array(), json::array(), json::array()),
                           args(json::array(), json::array(), json::array()), 7, 1)});
}

std::string doc(const json& nodes, const std::string& schema = "1.1.0-chakra.0.0.4") {
  return json{{"schema", schema}, {"pid", 1}, {"time", ""}, {"start_ts", 0}, {"finish_ts", 1}, {"nodes", nodes}}.dump();
}

json tensor(int id, long elements, const std::string& device = "cuda:0") { return json::array({id, id + 100, 0, elements, 4, device}); }

/// Kernel times of the tests: 100 us a GEMM, 20 us anything else, so that iterations are derived
/// by hand.
sim::Time stub_time(const sim::OpSignature& s) { return sim::Time::from_seconds(s.type == sim::OpType::gemm ? 100e-6 : 20e-6); }

trace::EtGraphOptions stub_options() {
  trace::EtGraphOptions o;
  o.kernel_time = stub_time;
  return o;
}

/// The iteration of every rank of `g` (us), on a DGX A100 of `gpus` GPUs.
std::vector<double> iteration_us(const EtGraph& g, int gpus = 8) {
  const topo::Cluster c = topo::resolve_cluster("dgx-a100", gpus);
  const sim::ExecutionResult r = sim::execute(g.graph, c, sim::CollectiveConfig{}, sim::NetworkKind::analytical);
  std::vector<double> out;
  for (const double s : trace::et_rank_seconds(g, r.end)) out.push_back(s * 1e6);
  return out;
}

}  // namespace

TEST_CASE("PyTorch ETs: the 1.0.1 layout and the 1.0.2+ layout read alike", "[pytorch_et]") {
  // aten::addmm(bias, x, w^T) with a list argument and an integer, in both layouts.
  const json values = json::array({tensor(1, 256), tensor(2, 64 * 128), tensor(3, 128 * 256), 1, json::array({3, 4})});
  const json shapes = json::array({json::array({256}), json::array({64, 128}), json::array({128, 256}), json::array(),
                                   json::array({json::array(), json::array()})});
  const json types = json::array({"Tensor(float)", "Tensor(float)", "Tensor(c10::BFloat16)", "Int", "GenericList[Int,Int]"});
  json flat = json::array({{{"name", "[pytorch|profiler|execution_graph|thread]"}, {"id", 2}, {"rf_id", 0}, {"parent", 1},
                            {"scope", 7}, {"tid", 1}, {"inputs", json::array()}, {"input_shapes", json::array()},
                            {"input_types", json::array()}, {"outputs", json::array()}, {"output_shapes", json::array()},
                            {"output_types", json::array()}},
                           {{"name", "aten::addmm"}, {"id", 5}, {"rf_id", 9}, {"parent", 2}, {"scope", 0}, {"tid", 3},
                            {"inputs", values}, {"input_shapes", shapes}, {"input_types", types}, {"outputs", json::array()},
                            {"output_shapes", json::array()}, {"output_types", json::array()}}});
  json nested = json::array({node(2, "[pytorch|profiler|execution_trace|thread]", 1, args(json::array(), json::array(), json::array()),
                                  args(json::array(), json::array(), json::array()), 7),
                             node(5, "aten::addmm", 2, args(values, shapes, types), args(json::array(), json::array(), json::array()),
                                  0, 3)});
  nested[1]["attrs"][0]["value"] = 9;  // rf_id
  const PytorchEt a = trace::parse_pytorch_et(doc(flat, "1.0.1"), "flat.json");
  const PytorchEt b = trace::parse_pytorch_et(doc(nested), "nested.json");
  REQUIRE(a.schema == "1.0.1");
  REQUIRE(b.schema == "1.1.0-chakra.0.0.4");
  for (const PytorchEt* e : {&a, &b}) {
    REQUIRE(e->nodes.size() == 2);
    const trace::EtNode& n = e->nodes[1];
    REQUIRE(n.name == "aten::addmm");
    REQUIRE(n.id == 5);
    REQUIRE(n.parent == 2);
    REQUIRE(n.rf_id == 9);
    REQUIRE(n.tid == 3);
    REQUIRE(n.scope == 0);
    REQUIRE(n.inputs.size() == 5);
    REQUIRE(n.inputs[1].tensors.size() == 1);
    const trace::EtTensor& x = n.inputs[1].tensors.front();
    REQUIRE((x.id == 2 && x.storage == 102 && x.offset == 0 && x.elements == 64 * 128 && x.element_bytes == 4));
    REQUIRE(x.on_gpu());
    REQUIRE(x.bytes() == 64 * 128 * 4);
    REQUIRE(n.inputs[1].shape == std::vector<std::int64_t>{64, 128});
    REQUIRE(n.inputs[2].type == "Tensor(c10::BFloat16)");
    REQUIRE(n.inputs[3].integer == 1);
    REQUIRE(n.inputs[4].integers == std::vector<std::int64_t>{3, 4});
    REQUIRE_FALSE(e->has_device_ops());
  }
  REQUIRE(trace::looks_like_pytorch_et(doc(nested)));
  REQUIRE_FALSE(trace::looks_like_pytorch_et(R"({"traceEvents": [], "schema": "x", "nodes": []})"));
}

TEST_CASE("PyTorch ETs: a malformed trace is refused with its file, node and field", "[pytorch_et]") {
  const auto refused = [](const std::string& text, const std::string& expect) {
    try {
      trace::parse_pytorch_et(text, "bad.json");
      FAIL("accepted: " << text);
    } catch (const sim::TraceError& e) {
      INFO(e.what());
      REQUIRE(std::string(e.what()).find(expect) != std::string::npos);
    }
  };
  json n = roots();
  n.push_back(node(3, "aten::relu", 2, args(json::array({json::array({1, 2, 0, 4, 4})}), json::array({json::array({4})}),
                                            json::array({"Tensor(float)"}))));
  refused(doc(n), "bad.json: /nodes/2/inputs/values/0 (id 3, \"aten::relu\"): expected a tensor [id, storage, offset, elements, "
                  "element bytes, device], found");
  json dup = roots();
  dup.push_back(node(2, "aten::relu", 2));
  refused(doc(dup), "bad.json: /nodes/2/id (id 2, \"aten::relu\"): id 2 is also node 1's");
  json noid = roots();
  noid.push_back({{"name", "aten::relu"}});
  refused(doc(noid), "/nodes/2/id (id ?, \"aten::relu\"): expected the node's id, found none");
  refused(R"({"schema": "1.0.1"})", "bad.json: expected a PyTorch execution trace: an object with a \"nodes\" list");
  json neg = roots();
  neg.push_back(node(3, "aten::relu", 2));
  neg[2]["ctrl_deps"] = -4;
  refused(doc(neg), "/nodes/2/ctrl_deps (id 3, \"aten::relu\"): expected a parent id >= 0, found -4");
  json gpu = roots();
  gpu.push_back(node(3, "void kernel", 2));
  gpu[2]["cat"] = "kernel";
  refused(doc(gpu), "/nodes/2/inclusive_dur (id 3, \"void kernel\"): expected a GPU op's duration");
  // Ops nested deeper than the walks allow.
  json deep = roots();
  for (int k = 3; k < 1010; ++k) deep.push_back(node(k, "aten::relu", k - 1));
  REQUIRE_THROWS_WITH(trace::pytorch_et_graph({trace::parse_pytorch_et(doc(deep), "deep.json")}, stub_options()),
                      Catch::Contains("deep.json: node 1003 (\"aten::relu\"): expected ops nested at most 1000 deep, found deeper"));
  // A trace without a thread root is no profiled run.
  const PytorchEt lone = trace::parse_pytorch_et(doc(json::array({node(3, "aten::relu", 0)})), "lone.json");
  REQUIRE_THROWS_WITH(trace::pytorch_et_graph({lone}, stub_options()), Catch::Contains("lone.json: no thread root"));
}

TEST_CASE("PyTorch ETs: a host ET's iteration, derived from its ops' costs", "[pytorch_et]") {
  // tests/data/traces/tiny_host_et.json: linear (a t view and an addmm), relu, then .item().
  // Host: 1 us per operator, 1 us per op called from Python, 5 us per launch.
  //   linear: 1 + linear, t, addmm 3 + launch 5 = 9: the GEMM runs 9-109;
  //   relu:   1 + 1 + 5 = 7 (host at 16): runs 109-129;
  //   item:   1 + item, _local_scalar_dense 2 + 5 = 8 (host at 24): its copy runs 129-149, and the
  //           host waits for it; the iteration ends at 149 us.
  const PytorchEt et = trace::load_pytorch_ets(data("traces/tiny_host_et.json")).front();
  const EtGraph g = trace::pytorch_et_graph({et}, stub_options());
  REQUIRE(g.ops == 3);
  REQUIRE(g.kernels == 3);
  REQUIRE(g.gemms == 1);
  REQUIRE(g.memory == 2);
  REQUIRE(g.host_syncs == 1);
  REQUIRE_FALSE(g.recorded_s.has_value());
  REQUIRE(iteration_us(g).front() == Approx(149.0).epsilon(1e-12));
  // The GEMM's signature: 64 x 256 x 128 in fp32 (PyTorch's matmuls do not use TF32 by default).
  bool found = false;
  for (const sim::OpSignature& s : g.graph.signatures) {
    if (s.type != sim::OpType::gemm) continue;
    found = true;
    REQUIRE(s.shape == std::vector<std::int64_t>{64, 256, 128, 1});
    REQUIRE(s.dtype == sim::DType::fp32);
    REQUIRE(s.flops == 2.0 * 64 * 256 * 128);
    REQUIRE(s.bytes == 4.0 * (256 + 64 * 128 + 128 * 256 + 64 * 256));
  }
  REQUIRE(found);
  // Cheaper launches shorten only the host's part: 4 us less per launch moves the GEMM's start
  // from 9 to 5 us, and nothing else waits on the host.
  trace::EtGraphOptions fast = stub_options();
  fast.launch = sim::Time::from_seconds(1e-6);
  REQUIRE(iteration_us(trace::pytorch_et_graph({et}, fast)).front() == Approx(145.0).epsilon(1e-12));
}

TEST_CASE("PyTorch ETs: collectives over the ranks' groups, waits, and one ET standing for its group", "[pytorch_et]") {
  // all_reduce of 1024 floats (pg_size 2), the compute stream waiting for it, then a relu.
  const auto rank_et = [](int ops, const std::string& path) {
    json n = roots();
    json comm_attrs = json::array({{{"name", "collective_name"}, {"type", "string"}, {"value", "allreduce"}},
                                   {{"name", "pg_size"}, {"type", "uint64"}, {"value", 2}}});
    int id = 3;
    for (int k = 0; k < ops; ++k) {
      n.push_back(node(id, "record_param_comms", 2,
                       args(json::array({json::array({tensor(7, 1024)}), 40 + k, json::array({"0", "default_pg"}), 0, "allreduce"}),
                            json::array(), json::array({"GenericList[Tensor(float)]", "Int", "Tuple[String,String]", "Int", "String"})),
                       args(json::array(), json::array(), json::array()), 0, 1, comm_attrs));
      n.push_back(node(id + 1, "record_param_comms", 2,
                       args(json::array({40 + k, 0, 0, "wait"}), json::array(), json::array({"Int", "Int", "Int", "String"}))));
      id += 2;
    }
    n.push_back(node(id, "aten::relu", 2, args(json::array({tensor(7, 1024)}), json::array({json::array({1024})}), json::array({"Tensor(float)"})),
                     args(json::array({tensor(8, 1024)}), json::array({json::array({1024})}), json::array({"Tensor(float)"}))));
    return trace::parse_pytorch_et(doc(n), path);
  };
  const EtGraph lone = trace::pytorch_et_graph({rank_et(1, "r0.json")}, stub_options());
  REQUIRE(lone.stands_for == 2);
  REQUIRE(lone.collectives == 1);
  REQUIRE(lone.waits == 1);
  REQUIRE(lone.collective_kinds.at("allreduce") == 1);
  REQUIRE(lone.collective_kinds.at("wait") == 1);
  REQUIRE(lone.graph.communicators.size() == 1);
  REQUIRE(lone.graph.communicators[0].ranks == std::vector<sim::RankId>{0});
  REQUIRE(lone.graph.communicators[0].groups == std::vector<std::vector<sim::GpuId>>{{0, 1}});
  sim::NodeId coll = 0, relu = 0;
  for (sim::NodeId i = 0; i < lone.graph.nodes.size(); ++i) {
    if (lone.graph.nodes[i].kind == sim::OpKind::collective) coll = i;
    if (lone.graph.names[lone.graph.nodes[i].name] == "aten::relu") relu = i;
  }
  REQUIRE(lone.graph.nodes[coll].bytes == 4096.0);
  // The relu waits for the collective through the stream wait before it.
  const sim::Node& r = lone.graph.nodes[relu];
  REQUIRE(r.deps.size() == 1);
  const sim::Node& wait = lone.graph.nodes[r.deps[0]];
  REQUIRE(wait.kind == sim::OpKind::sync);
  REQUIRE(wait.stream == r.stream);
  REQUIRE(std::find(wait.deps.begin(), wait.deps.end(), coll) != wait.deps.end());
  // Two ranks' ETs: one communicator of both, no folding.
  const EtGraph both = trace::pytorch_et_graph({rank_et(1, "r0.json"), rank_et(1, "r1.json")}, stub_options());
  REQUIRE(both.stands_for == 2);
  REQUIRE(both.graph.communicators.size() == 1);
  REQUIRE(both.graph.communicators[0].ranks == std::vector<sim::RankId>{0, 1});
  REQUIRE(both.graph.communicators[0].groups.empty());
  // The relu ends after the all-reduce: the iteration exceeds the compute-only one.
  REQUIRE(iteration_us(both)[0] > iteration_us(trace::pytorch_et_graph({rank_et(0, "r0.json")}, stub_options()))[0]);
  // Ranks whose traces disagree are refused, naming the file.
  REQUIRE_THROWS_WITH(trace::pytorch_et_graph({rank_et(1, "r0.json"), rank_et(2, "r1.json")}, stub_options()),
                      Catch::Contains("r1.json: 2 collectives, but r0.json has 1"));
  // A group past any cluster, or of no rank, is refused before anything is laid out.
  {
    PytorchEt huge = rank_et(1, "huge.json");
    for (trace::EtNode& e : huge.nodes) {
      if (e.name == "record_param_comms" && e.pg_size > 0) e.pg_size = 1'000'000'000;
    }
    REQUIRE_THROWS_WITH(trace::pytorch_et_graph({huge}, stub_options()),
                        Catch::Contains("huge.json: node 3 (record_param_comms): expected a process group of 1 to 1048576 GPUs, "
                                        "found 1000000000"));
    json bad = roots();
    bad.push_back(node(3, "record_param_comms", 2, args(json::array(), json::array(), json::array()),
                       args(json::array(), json::array(), json::array()), 0, 1,
                       json::array({{{"name", "pg_size"}, {"type", "uint64"}, {"value", -5}}})));
    REQUIRE_THROWS_WITH(trace::parse_pytorch_et(doc(bad), "neg.json"),
                        Catch::Contains("neg.json: /nodes/2/pg_size (id 3, \"record_param_comms\"): expected a process group of "
                                        "at least 1 rank, found -5"));
  }
  // Three ranks' traces for a group of two.
  REQUIRE_THROWS_WITH(trace::pytorch_et_graph({rank_et(1, "a.json"), rank_et(1, "b.json"), rank_et(1, "c.json")}, stub_options()),
                      Catch::Contains("a collective over a group of 2 GPUs, but 3 ranks' traces are given"));
}

TEST_CASE("PyTorch ETs: all_to_allv splits become the ranks' send matrix", "[pytorch_et]") {
  // Rank r sends rows (split sizes) of 8 floats: rank 0 [1, 3], rank 1 [2, 2].
  const auto rank_et = [](std::vector<int> split, const std::string& path) {
    json n = roots();
    const long rows = split[0] + split[1];
    n.push_back(node(3, "record_param_comms", 2,
                     args(json::array({tensor(7, rows * 8), 40, 1, 0, "all_to_allv", split, json::array({2, 2})}), json::array(),
                          json::array({"Tensor(float)", "Int", "Int", "Int", "String", "GenericList[Int,Int]", "GenericList[Int,Int]"}))));
    return trace::parse_pytorch_et(doc(n), path);
  };
  const EtGraph g = trace::pytorch_et_graph({rank_et({1, 3}, "r0.json"), rank_et({2, 2}, "r1.json")}, stub_options());
  REQUIRE(g.graph.send_matrices.size() == 1);
  const std::vector<double> expect{1 * 32.0, 3 * 32.0, 2 * 32.0, 2 * 32.0};
  REQUIRE(g.graph.send_matrices[0] == expect);
  for (const sim::Node& n : g.graph.nodes) {
    if (n.kind == sim::OpKind::collective) {
      REQUIRE(n.op == sim::CollectiveOp::all_to_all);
      REQUIRE(n.matrix == 0);
      REQUIRE(n.bytes == 4 * 32.0);
    }
  }
}

TEST_CASE("PyTorch ETs: a host+device ET replays its recorded times", "[pytorch_et]") {
  // The linker's output: host op A (0-10 us) launched kernel K1 (recorded 12-112 us), host op B
  // (10-15 us) launched K2 (112-162 us), both on stream 7. Replayed: K1 starts when A ended (10)
  // and runs its 100 us; K2 follows it for 50 us: 160 us. Recorded: 0 to 162 us.
  json n = roots();
  const auto host = [&](int id, const std::string& name, double ts, double dur) {
    json h = node(id, name, 2);
    h["ts"] = ts;
    h["inclusive_dur"] = dur;
    h["exclusive_dur"] = dur;
    return h;
  };
  const auto gpu = [&](int id, int parent, double ts, double dur) {
    json k = node(id, "void gemm_kernel", parent);
    k["cat"] = "kernel";
    k["ts"] = ts;
    k["inclusive_dur"] = dur;
    k["exclusive_dur"] = dur;
    k["stream"] = 7;
    return k;
  };
  n.push_back(host(3, "aten::mm", 0, 10));
  n.push_back(gpu(4, 3, 12, 100));
  n.push_back(host(5, "aten::relu", 10, 5));
  n.push_back(gpu(6, 5, 112, 50));
  const PytorchEt et = trace::parse_pytorch_et(doc(n), "linked.json");
  REQUIRE(et.has_device_ops());
  const EtGraph g = trace::pytorch_et_graph({et}, stub_options());
  REQUIRE(g.measured);
  REQUIRE(g.kernels == 2);
  REQUIRE(g.recorded_s.has_value());
  REQUIRE(*g.recorded_s == Approx(162e-6).epsilon(1e-12));
  REQUIRE(iteration_us(g).front() == Approx(160.0).epsilon(1e-12));
  // Timed from shapes instead (these ops have no GPU tensors: nothing to cost but the host's
  // 1 + 1 us per op called from Python).
  trace::EtGraphOptions shapes = stub_options();
  shapes.measured = false;
  const EtGraph s = trace::pytorch_et_graph({et}, shapes);
  REQUIRE_FALSE(s.measured);
  REQUIRE(s.kernels == 0);
  REQUIRE(iteration_us(s).front() == Approx(4.0).epsilon(1e-12));
}

TEST_CASE("PyTorch ETs: the third-party traces (PARAM's DLRM and ResNet, Chakra's sample)", "[pytorch_et]") {
  const char* shared = std::getenv("FORESIGHT_SHARED");
  const std::filesystem::path dir = std::filesystem::path(shared != nullptr ? shared : "../shared") / "validation" / "traces";
  if (!std::filesystem::is_directory(dir)) {
    WARN("skipped: " << dir << " is absent");
    return;
  }
  // DLRM: eight ranks' ETs, ordered by the number in their names.
  const auto dlrm = trace::load_pytorch_ets((dir / "param" / "dlrm_pytorch_et.tar.gz").string());
  REQUIRE(dlrm.size() == 8);
  for (std::size_t r = 0; r < dlrm.size(); ++r) REQUIRE(dlrm[r].path.ends_with("dlrm_eg_" + std::to_string(r) + ".json"));
  const EtGraph d = trace::pytorch_et_graph(dlrm, stub_options());
  REQUIRE(d.stands_for == 8);
  REQUIRE(d.graph.communicators.size() == 1);
  REQUIRE(d.graph.communicators[0].ranks.size() == 8);
  // ResNet on 2 GPUs, one rank's ET: each cuDNN forward convolution a conv_fprop kernel, each
  // convolution_backward an input and a weight gradient as its output_mask asks, counted again
  // here from the JSON itself.
  const std::string resnet = (dir / "param" / "1.1.0-chakra.0.0.4" / "resnet_2gpu_et.json.gz").string();
  const json raw = json::parse(trace::read_trace_text(resnet));
  std::size_t fprop = 0, dgrad = 0, wgrad = 0;
  for (const json& n : raw["nodes"]) {
    if (n["name"] == "aten::cudnn_convolution") ++fprop;
    if (n["name"] == "aten::convolution_backward") {
      const json& mask = n["inputs"]["values"].back();
      dgrad += mask[0].get<bool>();
      wgrad += mask[1].get<bool>();
    }
  }
  REQUIRE(fprop > 0);
  const EtGraph r = trace::pytorch_et_graph(trace::load_pytorch_ets(resnet), stub_options());
  REQUIRE(r.stands_for == 2);
  REQUIRE(r.graph.communicators[0].groups == std::vector<std::vector<sim::GpuId>>{{0, 1}});
  std::size_t got_f = 0, got_d = 0, got_w = 0;
  for (const sim::Node& n : r.graph.nodes) {
    if (n.kind != sim::OpKind::compute) continue;
    const sim::OpType t = r.graph.signatures[n.signature].type;
    got_f += t == sim::OpType::conv_fprop;
    got_d += t == sim::OpType::conv_dgrad;
    got_w += t == sim::OpType::conv_wgrad;
  }
  REQUIRE(got_f == fprop);
  REQUIRE(got_d == dgrad);
  REQUIRE(got_w == wgrad);
  REQUIRE(r.convolutions == fprop + dgrad + wgrad);
  // The first convolution: 32 x 3 x 224 x 224 by 64 filters 7 x 7, stride 2, padding 3, in TF32.
  bool first = false;
  for (const sim::OpSignature& s : r.graph.signatures) {
    if (s.type == sim::OpType::conv_fprop && s.shape[1] == 3) {
      first = true;
      REQUIRE(s.shape == std::vector<std::int64_t>{32, 3, 224, 224, 64, 7, 7, 2, 3, 1});
      REQUIRE(s.dtype == sim::DType::tf32);
    }
  }
  REQUIRE(first);
  // Chakra's sample: ten all-gathers of a lone rank's ET over a group of two.
  const EtGraph c = trace::pytorch_et_graph(trace::load_pytorch_ets((dir / "chakra" / "1.0.2-chakra.0.0.4.tgz").string()), stub_options());
  REQUIRE(c.collectives == 10);
  REQUIRE(c.collective_kinds.at("allgather") == 10);
  REQUIRE(c.stands_for == 2);
}

TEST_CASE("an ET's fused attention op names its kernel: cuDNN's, FlashAttention-2 or another", "[et]") {
  const auto q_arg = [] {
    trace::EtArg a;
    a.type = "Tensor(c10::BFloat16)";
    trace::EtTensor t;
    t.elements = 2 * 16 * 1024 * 64;
    t.element_bytes = 2;
    t.device = "cuda:0";
    a.tensors = {t};
    a.shape = {2, 16, 1024, 64};  // SDPA's (batch, heads, seq, head dim)
    return a;
  };
  const auto kernel_of = [&](const std::string& name) {
    trace::EtNode n;
    n.name = name;
    n.inputs = {q_arg(), q_arg(), q_arg()};
    const auto k = trace::et_shaped_kernels(n);
    REQUIRE(k.has_value());
    REQUIRE(k->size() == 1);
    const sim::OpSignature& s = k->front();
    REQUIRE(s.type == sim::OpType::attention);
    REQUIRE(s.shape.size() == 6);
    CHECK(s.shape[0] == 32);
    CHECK(s.shape[1] == 1024);
    CHECK(s.shape[3] == 64);
    return std::pair{s.shape[5], s.kernel};
  };
  CHECK(kernel_of("aten::_scaled_dot_product_cudnn_attention") == std::pair{sim::kAttentionCudnn, std::string("attention_fwd")});
  CHECK(kernel_of("aten::_scaled_dot_product_flash_attention") == std::pair{sim::kAttentionFlash2, std::string("attention_fwd")});
  CHECK(kernel_of("aten::_scaled_dot_product_flash_attention_backward") ==
        std::pair{sim::kAttentionFlash2, std::string("attention_bwd")});
  CHECK(kernel_of("aten::_scaled_dot_product_efficient_attention") ==
        std::pair{sim::kAttentionOther, std::string("attention_fwd")});
}
