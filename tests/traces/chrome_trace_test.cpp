// The Chrome/Perfetto trace writer and link-utilization counters, on a hand-built graph and a
// hand-made execution result with known times (traces/ depends only on sim, so no executor run).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "traces/chrome_trace.hpp"

using namespace foresight;
using nlohmann::json;
using sim::Node;
using sim::OpKind;
using sim::Time;

namespace {

Time ps(std::int64_t v) { return Time::from_ps(v); }

struct Run {
  sim::ExecutionGraph graph;
  sim::ExecutionResult result;
};

/// Adds a node that was ready at `ready`, ran from `start` to `end` and belongs to `instance`.
void add(Run& run, Node node, Time ready, Time start, Time end,
         std::uint32_t instance = sim::kNoInstance) {
  run.graph.add(std::move(node));
  run.result.ready.push_back(ready);
  run.result.start.push_back(start);
  run.result.end.push_back(end);
  run.result.comm_instance.push_back(instance);
  run.result.makespan = std::max(run.result.makespan, end);
}

Node op(OpKind kind, sim::RankId rank, sim::StreamId stream) {
  Node n;
  n.kind = kind;
  n.rank = rank;
  n.stream = stream;
  return n;
}

// Two ranks: a host op, compute, an all-reduce, a send/recv pair, a zero-duration sync and an
// unlabelled kernel on an unnamed stream.
Run two_ranks() {
  Run run;
  auto& g = run.graph;
  g.add_rank(0, 0);
  g.add_rank(1, 1);
  g.stream_names = {{0, "host"}, {1, "compute"}, {2, "nccl"}};
  const auto comm = g.add_communicator({0, 1});
  sim::OpSignature gemm;
  gemm.type = sim::OpType::gemm;
  gemm.kernel = "linear_fwd";
  gemm.shape = {128, 1024, 1024, 1};
  gemm.flops = 2.0 * 128 * 1024 * 1024;
  const auto gemm_sig = g.add_signature(gemm);
  sim::OpSignature relu;
  relu.kernel = "relu";
  relu.shape = {128, 1024};
  const auto relu_sig = g.add_signature(relu);

  Node host = op(OpKind::host, 0, sim::kHostStream);  // node 0
  host.name = g.intern("load batch");
  host.phase = sim::Phase::data;
  add(run, host, ps(0), ps(0), ps(5'000'000));
  for (sim::RankId r = 0; r < 2; ++r) {  // nodes 1, 2
    Node fc = op(OpKind::compute, r, 1);
    fc.name = g.intern("fc\"1\"\n<fwd>");  // escaped in the JSON
    fc.phase = sim::Phase::forward;
    fc.layer = 0;
    fc.micro_batch = 0;
    fc.signature = gemm_sig;
    fc.dispatch = ps(250'000);
    add(run, fc, ps(6'000'000), ps(6'000'000 + r * 500'000), ps(16'000'000 + r * 4'000'001));
  }
  for (sim::RankId r = 0; r < 2; ++r) {  // nodes 3, 4: instance 0
    Node ar = op(OpKind::collective, r, 2);
    ar.name = g.intern("grad all-reduce");
    ar.phase = sim::Phase::backward;
    ar.op = sim::CollectiveOp::all_reduce;
    ar.bytes = 1e6;
    ar.communicator = comm;
    const Time ready = r == 0 ? ps(16'000'000) : ps(20'000'001);
    add(run, ar, ready, ps(20'000'001), ps(30'000'000), 0);
  }
  Node send = op(OpKind::send, 0, 2);  // node 5: instance 1
  send.peer = 1;
  send.tag = 7;
  send.bytes = 4096;
  add(run, send, ps(30'000'000), ps(31'500'000), ps(33'250'000), 1);
  Node recv = op(OpKind::recv, 1, 2);  // node 6: instance 1
  recv.peer = 0;
  recv.tag = 7;
  recv.bytes = 4096;
  add(run, recv, ps(30'500'000), ps(31'500'000), ps(33'250'000), 1);
  Node sync = op(OpKind::sync, 0, 1);  // node 7: zero duration, left out
  add(run, sync, ps(33'250'000), ps(33'250'000), ps(33'250'000));
  Node unnamed = op(OpKind::compute, 1, 3);  // node 8: named after its kernel, on "stream 3"
  unnamed.signature = relu_sig;
  add(run, unnamed, ps(33'250'000), ps(123'456'789'012), ps(123'456'789'013));
  return run;
}

const json& arg(const json& e, const char* key) { return e.at("args").at(key); }

std::vector<json> events(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == ph) out.push_back(e);
  }
  return out;
}

}  // namespace

TEST_CASE("chrome trace: valid JSON, a process per rank, a thread per stream", "[traces]") {
  const Run run = two_ranks();
  const std::string text =
      trace::chrome_trace_json(run.graph, run.result, {}, {"two ranks", {{"plan", "dp=2"}}});
  const json t = json::parse(text);  // throws on invalid JSON
  CHECK(t.at("displayTimeUnit") == "ns");
  CHECK(t.at("metadata").at("title") == "two ranks");
  CHECK(t.at("metadata").at("plan") == "dp=2");

  std::map<int, std::vector<std::string>> process_names;
  std::map<std::pair<int, int>, std::string> thread_names;
  for (const json& e : events(t, "M")) {
    if (e.at("name") == "process_name") process_names[e.at("pid")].push_back(arg(e, "name"));
    if (e.at("name") == "thread_name") {
      const auto key = std::make_pair(e.at("pid").get<int>(), e.at("tid").get<int>());
      CHECK(thread_names.count(key) == 0);
      thread_names[key] = arg(e, "name");
    }
  }
  // Without counters there is no links process.
  CHECK(process_names ==
        std::map<int, std::vector<std::string>>{{1, {"rank 0 (GPU 0)"}}, {2, {"rank 1 (GPU 1)"}}});
  // tid = stream + 1; rank 1 has no host op, so no host thread.
  CHECK(thread_names == std::map<std::pair<int, int>, std::string>{{{1, 1}, "host"},
                                                                   {{1, 2}, "compute"},
                                                                   {{1, 3}, "nccl"},
                                                                   {{2, 2}, "compute"},
                                                                   {{2, 3}, "nccl"},
                                                                   {{2, 4}, "stream 3"}});
}

TEST_CASE("chrome trace: a slice per node at its start, in microseconds to the picosecond",
          "[traces]") {
  const Run run = two_ranks();
  const std::string text = trace::chrome_trace_json(run.graph, run.result, {}, {"t", {}});
  const json t = json::parse(text);
  const auto slices = events(t, "X");
  // Nine nodes, the zero-duration sync left out.
  REQUIRE(slices.size() == 8);
  const std::size_t node_of_slice[] = {0, 1, 2, 3, 4, 5, 6, 8};
  for (std::size_t k = 0; k < slices.size(); ++k) {
    const json& e = slices[k];
    const std::size_t i = node_of_slice[k];
    REQUIRE(e.at("ts").is_number());
    REQUIRE(e.at("dur").is_number());
    CHECK(e.at("dur").get<double>() >= 0.0);
    // ts = start in us (ps / 1e6); dur = end - start.
    CHECK(e.at("ts").get<double>() == Approx(run.result.start[i].ps() / 1e6).margin(1e-6));
    CHECK(e.at("dur").get<double>() ==
          Approx((run.result.end[i] - run.result.start[i]).ps() / 1e6).margin(1e-6));
    CHECK(e.at("pid") == run.graph.nodes[i].rank + 1);
    CHECK(e.at("tid") == run.graph.nodes[i].stream + 1);
  }
  // Integer picoseconds survive exactly in the text: 123456789012 ps = 123456.789012 us, 1 ps.
  CHECK(text.find("\"ts\":123456.789012,\"dur\":0.000001") != std::string::npos);
  CHECK(text.find("\"ts\":20.000001") != std::string::npos);

  // Names, categories and arguments.
  CHECK(slices[0].at("name") == "load batch");
  CHECK(slices[0].at("cat") == "host,data");
  CHECK(slices[1].at("name") == "F0 fc\"1\"\n<fwd>");  // a micro-batch's forward: "F<m> " first
  CHECK(slices[1].at("cat") == "compute,fwd");
  CHECK(arg(slices[1], "dispatch_us").get<double>() == Approx(0.25).margin(1e-9));
  CHECK(arg(slices[1], "kernel") == "linear_fwd");
  CHECK(arg(slices[1], "flops").get<double>() == 2.0 * 128 * 1024 * 1024);
  CHECK(arg(slices[1], "layer") == 0);
  CHECK(arg(slices[1], "micro_batch") == 0);
  CHECK(slices[3].at("cat") == "collective,bwd");
  CHECK(arg(slices[3], "op") == "all_reduce");
  CHECK(arg(slices[3], "bytes").get<double>() == 1e6);
  CHECK(arg(slices[3], "communicator") == 0);
  // wait_us = start - ready: rank 0 waited 20.000001 - 16 us for rank 1; rank 1 not at all.
  CHECK(arg(slices[3], "wait_us").get<double>() == Approx(4.000001).margin(1e-9));
  CHECK(arg(slices[4], "wait_us").get<double>() == 0.0);
  CHECK(arg(slices[5], "peer") == 1);
  CHECK(arg(slices[5], "tag") == 7);
  CHECK(arg(slices[6], "wait_us").get<double>() == Approx(1.0).margin(1e-9));
  CHECK(slices[7].at("name") == "relu");  // no label: the kernel
  CHECK(slices[7].at("cat") == "compute");
}

TEST_CASE("chrome trace: flows bind the members of each collective and transfer", "[traces]") {
  const Run run = two_ranks();
  const json t = json::parse(trace::chrome_trace_json(run.graph, run.result, {}, {"t", {}}));
  const auto slices = events(t, "X");
  // A flow event lies inside a slice of its own track.
  const auto inside_slice = [&](const json& f) {
    for (const json& s : slices) {
      const double ts = s.at("ts"), end = ts + s.at("dur").get<double>();
      if (s.at("pid") == f.at("pid") && s.at("tid") == f.at("tid") && ts <= f.at("ts") &&
          f.at("ts") <= end) {
        return true;
      }
    }
    return false;
  };
  std::map<std::uint64_t, std::vector<json>> starts, steps, finishes;
  for (const json& f : events(t, "s")) starts[f.at("id")].push_back(f);
  for (const json& f : events(t, "t")) steps[f.at("id")].push_back(f);
  for (const json& f : events(t, "f")) finishes[f.at("id")].push_back(f);
  // Ids are the comm instances: 0 the all-reduce, 1 the send/recv; one start and one finish each.
  REQUIRE(starts.size() == 2);
  REQUIRE(finishes.size() == 2);
  CHECK(steps.empty());  // two members each
  for (const std::uint64_t id : {0u, 1u}) {
    REQUIRE(starts[id].size() == 1);
    REQUIRE(finishes[id].size() == 1);
    const json& s = starts[id][0];
    const json& f = finishes[id][0];
    CHECK(s.at("cat") == f.at("cat"));
    CHECK(s.at("name") == f.at("name"));
    CHECK(f.at("bp") == "e");
    CHECK(s.at("ts").get<double>() <= f.at("ts").get<double>());
    CHECK(inside_slice(s));
    CHECK(inside_slice(f));
  }
  // The all-reduce goes from rank 0 to rank 1 on the nccl stream; the transfer from the sender.
  CHECK(starts[0][0].at("pid") == 1);
  CHECK(finishes[0][0].at("pid") == 2);
  CHECK(starts[0][0].at("tid") == 3);
  CHECK(starts[0][0].at("name") == "all_reduce");
  CHECK(starts[1][0].at("pid") == 1);    // send on rank 0
  CHECK(finishes[1][0].at("pid") == 2);  // recv on rank 1
}

TEST_CASE("chrome trace: three members chain start, step, finish", "[traces]") {
  Run run;
  for (sim::RankId r = 0; r < 3; ++r) run.graph.add_rank(r, r);
  run.graph.add_communicator({0, 1, 2});
  for (sim::RankId r = 0; r < 3; ++r) {
    Node n = op(OpKind::collective, r, 2);
    add(run, n, ps(0), ps(1'000'000), ps(3'000'000 + r), 5);
  }
  const json t = json::parse(trace::chrome_trace_json(run.graph, run.result, {}, {"t", {}}));
  REQUIRE(events(t, "s").size() == 1);
  REQUIRE(events(t, "t").size() == 1);
  REQUIRE(events(t, "f").size() == 1);
  CHECK(events(t, "s")[0].at("pid") == 1);
  CHECK(events(t, "t")[0].at("pid") == 2);
  CHECK(events(t, "f")[0].at("pid") == 3);
  CHECK(events(t, "t")[0].at("id") == 5);
  // One point inside all three slices: the middle of their overlap [1, 3] us.
  CHECK(events(t, "f")[0].at("ts").get<double>() == Approx(2.0).margin(1e-6));
}

TEST_CASE("link utilization: percent of capacity between samples", "[traces]") {
  sim::ExecutionResult result;
  // Link a at 400 GB/s: 1 MB in [0, 10) us -> 1e6 / (10e-6 * 4e11) = 25 %; nothing in [10, 20);
  // 3 MB in [20, 30) us -> 75 %; idle after the last sample.
  result.link_bytes.push_back(
      {{ps(0), 0.0}, {ps(10'000'000), 1e6}, {ps(20'000'000), 1e6}, {ps(30'000'000), 4e6}});
  // Link b at 1 TB/s, first sampled at 5 us with 2 MB carried since 0: 2e6 / (5e-6 * 1e12) = 40 %;
  // then idle (consecutive zeros merge into one point).
  result.link_bytes.push_back({{ps(5'000'000), 2e6}, {ps(15'000'000), 2e6}});
  const auto series = trace::link_utilization(result, {"a", "b"}, {4e11, 1e12});
  REQUIRE(series.size() == 2);
  CHECK(series[0].name == "a");
  CHECK(series[0].unit == "percent");
  const std::vector<std::pair<std::int64_t, double>> expected_a = {
      {0, 25.0}, {10'000'000, 0.0}, {20'000'000, 75.0}, {30'000'000, 0.0}};
  REQUIRE(series[0].points.size() == expected_a.size());
  for (std::size_t k = 0; k < expected_a.size(); ++k) {
    CHECK(series[0].points[k].first.ps() == expected_a[k].first);
    CHECK(series[0].points[k].second == Approx(expected_a[k].second).epsilon(1e-12));
  }
  REQUIRE(series[1].points.size() == 2);
  CHECK(series[1].points[0].first.ps() == 0);
  CHECK(series[1].points[0].second == Approx(40.0).epsilon(1e-12));
  CHECK(series[1].points[1].first.ps() == 5'000'000);
  CHECK(series[1].points[1].second == 0.0);

  // As counter events of the links process (pid = ranks + 1), a value per point.
  const Run run = two_ranks();
  const json t = json::parse(trace::chrome_trace_json(run.graph, run.result, series, {"t", {}}));
  int links_processes = 0;
  for (const json& e : events(t, "M")) {
    if (e.at("name") == "process_name" && e.at("pid") == 3) {
      CHECK(arg(e, "name") == "network links");
      ++links_processes;
    }
  }
  CHECK(links_processes == 1);
  const auto counters = events(t, "C");
  REQUIRE(counters.size() == 6);
  CHECK(counters[0].at("pid") == 3);
  CHECK(counters[0].at("name") == "a");
  CHECK(arg(counters[2], "percent").get<double>() == Approx(75.0));
  CHECK(counters[2].at("ts").get<double>() == Approx(20.0));
}

TEST_CASE("link utilization and trace errors", "[traces]") {
  sim::ExecutionResult result;
  result.link_bytes.push_back({{ps(0), 0.0}, {ps(10), 5.0}});
  CHECK_THROWS_AS(trace::link_utilization(result, {}, {1e9}), sim::TraceError);
  CHECK_THROWS_AS(trace::link_utilization(result, {"a"}, {0.0}), sim::TraceError);
  result.link_bytes[0].push_back({ps(20), 1.0});  // carried bytes decrease
  CHECK_THROWS_AS(trace::link_utilization(result, {"a"}, {1e9}), sim::TraceError);

  Run run = two_ranks();
  run.result.start.pop_back();  // one entry short of the graph's nodes
  CHECK_THROWS_AS(trace::chrome_trace_json(run.graph, run.result, {}, {"t", {}}), sim::TraceError);
  run = two_ranks();
  run.result.comm_instance.push_back(0);  // one too many
  CHECK_THROWS_AS(trace::chrome_trace_json(run.graph, run.result, {}, {"t", {}}), sim::TraceError);
  run = two_ranks();
  CHECK_THROWS_AS(trace::chrome_trace_json(run.graph, run.result, {}, {"t", {{"title", "x"}}}),
                  sim::TraceError);
  trace::CounterSeries bad{"bad", "percent", {{ps(0), std::numeric_limits<double>::infinity()}}};
  CHECK_THROWS_AS(trace::chrome_trace_json(run.graph, run.result, {bad}, {"t", {}}),
                  sim::TraceError);
}

TEST_CASE("chrome trace: same input, same bytes", "[traces]") {
  const Run a = two_ranks();
  const Run b = two_ranks();
  sim::ExecutionResult samples;
  samples.link_bytes.push_back({{ps(0), 0.0}, {ps(1'000'000), 1e5}});
  const auto counters = trace::link_utilization(samples, {"nvlink 0->1"}, {3e11});
  const trace::TraceMetadata meta{"run", {{"scenario", "s.json"}, {"plan", "dp=2"}}};
  const std::string first = trace::chrome_trace_json(a.graph, a.result, counters, meta);
  CHECK(first == trace::chrome_trace_json(b.graph, b.result, counters, meta));
  CHECK(first == trace::chrome_trace_json(a.graph, a.result, counters, meta));
}

namespace {
/// Counts the write calls that reach it and keeps their bytes.
struct CountingBuf : std::stringbuf {
  int writes = 0;
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    ++writes;
    return std::stringbuf::xsputn(s, n);
  }
};
}  // namespace

TEST_CASE("chrome trace: streamed in pieces, the same bytes, and never left half written", "[traces]") {
  // 20,000 slices of ~150 bytes each are about 3 MB: more than two 1 MiB pieces.
  Run run;
  run.graph.add_rank(0, 0);
  for (std::int64_t i = 0; i < 20'000; ++i) add(run, op(OpKind::compute, 0, 1), ps(i * 10), ps(i * 10), ps(i * 10 + 5));
  const trace::TraceMetadata meta{"big", {}};
  const std::string whole = trace::chrome_trace_json(run.graph, run.result, {}, meta);
  REQUIRE(whole.size() > 2 * (std::size_t{1} << 20));
  CountingBuf buf;
  std::ostream os(&buf);
  trace::write_chrome_trace(os, run.graph, run.result, {}, meta);
  CHECK(buf.str() == whole);
  CHECK(buf.writes >= 3);  // each piece is written as it fills, not the whole at the end

  // A trace that fails half way leaves neither the file nor its temporary behind: a counter
  // value that is not finite is found when the counters are written, after the slices' 3 MB.
  const auto dir = std::filesystem::temp_directory_path() / "foresight-trace-stream-test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "t.json").string();
  std::filesystem::remove(path);
  const std::vector<trace::CounterSeries> bad{{"link", "percent", {{ps(0), std::nan("")}}}};
  CHECK_THROWS_AS(sim::write_file_atomically(
                      path, [&](std::ostream& out) { trace::write_chrome_trace(out, run.graph, run.result, bad, meta); }),
                  sim::TraceError);
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove_all(dir);
}
