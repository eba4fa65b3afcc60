// A profile database from a trace recorded with shapes: which operators become which kernels,
// their GPU time, and the database's use by the simulator.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "tests/test_paths.hpp"
#include "topologies/gpu_spec.hpp"
#include "traces/kineto.hpp"
#include "traces/profile_db_json.hpp"
#include "traces/profile_import.hpp"

using namespace foresight;

namespace {

std::map<std::string, std::pair<sim::OpSignature, double>> by_kernel(const sim::ProfileDb& db) {
  std::map<std::string, std::pair<sim::OpSignature, double>> out;
  for (const auto& [sig, seconds] : db.entries()) out[sig.kernel] = {sig, seconds};
  return out;
}

}  // namespace

TEST_CASE("a linear layer's forward and backward GEMMs are imported with the kernels they launched", "[traces]") {
  // shapes_kineto.json: one fp16 linear layer, 32 rows, 512 in, 100 out. Forward: addmm inside
  // aten::linear, one 50 us kernel. Backward (autograd thread): the input gradient mm
  // (grad [32, 100] x w [100, 512], 30 us) and the weight gradient mm (x^T [512, 32] x
  // grad [32, 100], two kernels of 25 and 15 us). An addmm without recorded shapes is skipped.
  const auto t = trace::load_kineto(test::data_path("traces/shapes_kineto.json"));
  const trace::ImportedProfile p = trace::import_profile({t}, "A100-SXM4-40GB");
  REQUIRE(p.instances == 3);
  REQUIRE(p.no_shapes == 1);
  REQUIRE(p.db.gpu == "A100-SXM4-40GB");
  const auto k = by_kernel(p.db);
  REQUIRE(k.size() == 3);
  const auto& fwd = k.at("linear_fwd");
  REQUIRE(fwd.first.shape == std::vector<std::int64_t>{32, 100, 512, 1});  // rows, out, in
  REQUIRE(fwd.first.dtype == sim::DType::fp16);
  REQUIRE(fwd.first.batch_axis == 0);
  REQUIRE(fwd.second == Approx(50e-6));
  const auto& dgrad = k.at("linear_dgrad");
  REQUIRE(dgrad.first.shape == std::vector<std::int64_t>{32, 512, 100, 1});  // rows, in, out
  REQUIRE(dgrad.second == Approx(30e-6));
  const auto& wgrad = k.at("linear_wgrad");
  REQUIRE(wgrad.first.shape == std::vector<std::int64_t>{100, 512, 32, 1});  // out, in, rows
  REQUIRE(wgrad.first.batch_axis == 2);
  REQUIRE(wgrad.second == Approx(25e-6 + 15e-6));
  // The keys are those of the model builder's linear layer, so the simulator finds them.
  trace::KinetoTrace bare = t;
  for (auto& op : bare.cpu_ops) op.input_dims.clear();
  REQUIRE_THROWS_WITH(trace::import_profile({bare}, "A100-SXM4-40GB"), Catch::Contains("record_shapes=True"));
}

TEST_CASE("GEMMs imported from the recsys trace never beat the GPU's peak", "[traces]") {
  const std::string path = test::shared_path("validation/traces/hta/trace_diff/control/control.json.gz");
  if (path.empty()) {
    WARN("skipped: ../shared/validation/traces is absent");
    return;
  }
  // Recorded on an A100 (A100-PG509-200, the 40 GB SXM part's clocks): every measured GEMM's
  // rate is at most the catalog's peak for its element type.
  const trace::ImportedProfile p = trace::import_profile(trace::load_kineto_files(path), "A100-SXM4-40GB");
  REQUIRE(p.instances > 1000);
  const topo::GpuSpec& gpu = topo::find_gpu_spec("A100-SXM4-40GB");
  const auto peak = [&](sim::DType d) {
    return d == sim::DType::fp32 ? gpu.fp32 : d == sim::DType::tf32 ? gpu.tf32 : d == sim::DType::bf16 ? gpu.bf16 : gpu.fp16;
  };
  std::size_t linear = 0;
  for (const auto& [sig, seconds] : p.db.entries()) {
    const double flops = 2.0 * static_cast<double>(sig.shape[0] * sig.shape[1] * sig.shape[2] * sig.shape[3]);
    CAPTURE(sig.key(), seconds);
    REQUIRE(flops / seconds <= peak(sig.dtype).per_second());
    linear += sig.kernel.starts_with("linear_") ? 1 : 0;
  }
  REQUIRE(linear > 0);
}

TEST_CASE("a profile database's kernels have a batch >= 1 and a duration sim::Time holds", "[traces]") {
  using Catch::Matchers::Contains;
  // Issue 25 (fuzz/corpus/profile_db/*.ConfigError): a kernel measured at batch 0 looked up at
  // batch 4 took 1 s x 4 / 0 = inf, and 1e300 s passed; both threw InternalError when simulated.
  const auto db = [](const std::string& shape, const std::string& seconds) {
    return R"({"format": "foresight-profile-db", "version": 1, "gpu": "A100-SXM4-40GB", "source": "test",
               "kernels": [{"kernel": "gemm", "type": "gemm", "dtype": "bf16", "shape": )" + shape +
           R"(, "batch_axis": 0, "seconds": )" + seconds + "}]}";
  };
  sim::OpSignature at4;  // the kernel at batch 4: twice its measured batch, twice its time
  at4.type = sim::OpType::gemm;
  at4.dtype = sim::DType::bf16;
  at4.kernel = "gemm";
  at4.shape = {4, 8};
  REQUIRE(trace::parse_profile_db(db("[2, 8]", "1e-3"), "db.json").lookup(at4) == Approx(2e-3));
  REQUIRE_THROWS_WITH(trace::parse_profile_db(db("[0, 8]", "1"), "db.json"),
                      Contains("db.json: /kernels/0/shape/0") && Contains("batch size >= 1"));
  REQUIRE_THROWS_WITH(trace::parse_profile_db(db("[2, 8]", "1e300"), "db.json"),
                      Contains("db.json: /kernels/0/seconds") && Contains("106 days"));
  REQUIRE_THROWS_AS(trace::parse_profile_db("{\"format\": 1e400}", "db.json"), sim::ConfigError);
}

TEST_CASE("a profile database says how its memory-bound kernels were timed", "[traces]") {
  using Catch::Matchers::Contains;
  const auto db = [](const std::string& timing) {
    return R"({"format": "foresight-profile-db", "version": 1, "gpu": "A100-SXM4-40GB", "source": "test",)" + timing +
           R"( "kernels": []})";
  };
  // Absent: the kernels themselves (trace import, a database written by hand).
  REQUIRE(trace::parse_profile_db(db(""), "db.json").memory_timing == sim::MemoryTiming::kernel);
  REQUIRE(trace::parse_profile_db(db(R"("memory_timing": "kernel",)"), "db.json").memory_timing ==
          sim::MemoryTiming::kernel);
  const sim::ProfileDb copy = trace::parse_profile_db(db(R"("memory_timing": "copy",)"), "db.json");
  REQUIRE(copy.memory_timing == sim::MemoryTiming::copy);
  REQUIRE_THROWS_WITH(trace::parse_profile_db(db(R"("memory_timing": "copies",)"), "db.json"),
                      Contains("db.json: /memory_timing") && Contains(R"(expected "kernel" or "copy")") &&
                          Contains("copies"));
  REQUIRE_THROWS_WITH(trace::parse_profile_db(db(R"("memory_timing": 1,)"), "db.json"),
                      Contains("db.json: /memory_timing") && Contains("expected a string"));
  // Written back as read.
  REQUIRE(trace::parse_profile_db(trace::profile_db_json(copy, {}), "again.json").memory_timing ==
          sim::MemoryTiming::copy);
  REQUIRE(nlohmann::json::parse(trace::profile_db_json(sim::ProfileDb{}, {}))["memory_timing"] == "kernel");
}
