// Replaying a trace on another GPU model: the trace's GPU from its recorded name or --trace-gpu,
// the catalog's numbers retiming reads, and the V100 -> A100 check on HTA's trace_diff pair.
#include "validate/trace_retime.hpp"

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>

#include "common/error.hpp"
#include "tests/test_paths.hpp"

using namespace foresight;
using Catch::Matchers::Contains;

TEST_CASE("retiming reads the catalog's SMs and the compute model's achievable HBM bandwidth", "[validate]") {
  const auto h100 = validate::retime_gpu(topo::find_gpu_spec("H100-SXM5-80GB"));
  REQUIRE(h100.name == "H100-SXM5-80GB");
  REQUIRE(h100.compute_capability == 90);
  REQUIRE(h100.sm_count == 132);
  REQUIRE(h100.hbm_bytes_per_s == Approx(3.35e12 * (2.90 / 3.35)));  // the STREAM copy, 2.90 TB/s

  trace::KinetoTrace t;
  t.path = "v100.json";
  t.gpu_name = "Tesla V100-SXM2-16GB";
  REQUIRE(validate::trace_gpu(t, "").name == "V100-SXM2-32GB");
  REQUIRE(validate::trace_gpu(t, "a100-sxm4-40gb").name == "A100-SXM4-40GB");  // named wins
  REQUIRE_THROWS_WITH(validate::trace_gpu(t, "V200"), Contains("--trace-gpu: expected a catalog GPU name") &&
                                                         Contains("found \"V200\""));
  t.gpu_name = "NVIDIA GeForce RTX 4090";
  REQUIRE_THROWS_WITH(validate::trace_gpu(t, ""), Contains("v100.json: the trace's GPU \"NVIDIA GeForce RTX 4090\" is "
                                                           "not a catalog model") &&
                                                      Contains("--trace-gpu"));
  t.gpu_name = "NVIDIA A100-SXM4-40GB";
  REQUIRE_FALSE(validate::retimer_for(t, "", topo::find_gpu_spec("A100-SXM4-40GB")).has_value());  // same model
  const auto r = validate::retimer_for(t, "", topo::find_gpu_spec("H100-SXM5-80GB"));
  REQUIRE(r.has_value());
  REQUIRE(r->bandwidth_factor() == Approx(1555e9 * (1.61 / 2.039) / 2.90e12));
}

TEST_CASE("the V100 DLRM trace retimed to the A100 comes closer to the A100's kernels than its own times", "[validate]") {
  const std::string dir = test::shared_path("validation/traces");
  if (dir.empty()) {
    WARN("skipped: ../shared/validation/traces is absent");
    return;
  }
  const validate::DatasetResult d = validate::run_trace_retime(dir);
  REQUIRE(d.cases.size() == 3);
  for (const auto& c : d.cases) REQUIRE(c.evaluated);
  // Kernels of a wave or more all scale by one factor, so their unretimed total is the
  // prediction / factor. Retimed, they must be within 15% of the A100's (Habitat's accuracy),
  // and closer than unretimed.
  const double factor = 900.0 / 1555.0;
  const auto& scaled = d.cases[1];
  REQUIRE_THAT(scaled.id, Contains("one wave or more"));
  REQUIRE(std::abs(scaled.error_pct) < 15.0);
  REQUIRE(std::abs(scaled.predicted - scaled.measured) < std::abs(scaled.predicted / factor - scaled.measured));
  // Kernels under one wave keep the V100's times: the retimed total is theirs.
  REQUIRE_THAT(d.cases[0].note, Contains("the V100's times unchanged: " + fmt::format("{:+.1f}%", d.cases[0].error_pct)));
  // Matrix operators: faster than the V100 measured them, but not yet as fast as the A100 (README).
  const auto& gemm = d.cases[2];
  REQUIRE_THAT(gemm.note, Contains("19 operator shapes"));
  REQUIRE(gemm.predicted > gemm.measured);
  REQUIRE_FALSE(d.threshold_pct.has_value());  // reported, not enforced (see validate/trace_retime.cpp)
}
