// The collective model against measured nccl-tests bus bandwidth (validate/data/nccl_busbw.json):
// calibration from declared cases only, predictions within the bounds.
#include <catch2/catch.hpp>

#include <cmath>

#include "common/error.hpp"
#include "validate/calibration.hpp"
#include "validate/collective_fit.hpp"

using namespace foresight;
using validate::Role;

namespace {

const validate::NcclDataset& dataset() {
  static const auto d = validate::load_nccl_dataset(validate::data_dir() + "/nccl_busbw.json");
  return d;
}

const std::vector<validate::PointResult>& predictions() {
  static const auto r = validate::evaluate(dataset(), run::default_collective_config(), sim::NetworkKind::flow);
  return r;
}

const validate::PointResult& point(const std::string& id) {
  for (const auto& r : predictions()) {
    if (r.point->id == id) return r;
  }
  throw std::runtime_error("no point " + id);
}

}  // namespace

TEST_CASE("the stored collective calibration is what the fit gives", "[validate]") {
  const auto stored = run::load_calibration(run::default_calibration_path()).collectives;
  const auto fitted = validate::fit_dataset(dataset());
  REQUIRE(stored.profiles.size() == fitted.profiles.size());
  for (std::size_t i = 0; i < stored.profiles.size(); ++i) {
    const auto& s = stored.profiles[i];
    const auto& f = fitted.profiles[i];
    REQUIRE(s.compute_capability == f.compute_capability);
    REQUIRE(s.calibration.launch_us == Approx(f.calibration.launch_us).margin(1e-5));  // stored to 1 ps
    REQUIRE(s.calibration.latency_scale == Approx(f.calibration.latency_scale).epsilon(1e-6));
    for (int p = 0; p < sim::kProtocolCount; ++p) {
      REQUIRE(s.calibration.efficiency[p] == Approx(f.calibration.efficiency[p]).epsilon(1e-6));
    }
    REQUIRE(s.fitted_on == f.fitted_on);
    // Only calibration cases feed it.
    for (const auto& id : s.fitted_on) {
      bool calibration = false;
      for (const auto& p : dataset().points) calibration = calibration || (p.id == id && p.role == Role::calibration);
      REQUIRE(calibration);
    }
  }
}

TEST_CASE("a prediction case never feeds a constant", "[validate]") {
  auto changed = dataset();
  std::size_t edited = 0;
  for (auto& p : changed.points) {
    if (p.role == Role::prediction) {
      p.busbw_GBps *= 0.5;
      ++edited;
    }
  }
  REQUIRE(edited > 30);
  const auto a = validate::fit_dataset(dataset());
  const auto b = validate::fit_dataset(changed);
  for (std::size_t i = 0; i < a.profiles.size(); ++i) {
    REQUIRE(a.profiles[i].calibration.launch_us == b.profiles[i].calibration.launch_us);
    REQUIRE(a.profiles[i].calibration.efficiency == b.profiles[i].calibration.efficiency);
  }
  // Whereas a calibration case does.
  for (auto& p : changed.points) {
    if (p.role == Role::calibration) p.busbw_GBps *= 0.9;
  }
  const auto c = validate::fit_dataset(changed);
  REQUIRE(c.profiles[0].calibration.launch_us != a.profiles[0].calibration.launch_us);
}

namespace {

/// Every prediction of a sweep within 15% from 1 MiB and 10% from 64 MiB (the bounds).
void require_sweep_within_bounds(const std::string& series) {
  std::size_t checked = 0;
  for (const auto& r : predictions()) {
    if (r.point->series != series || r.point->role != Role::prediction) continue;
    INFO(r.point->id << " measured " << r.point->busbw_GBps << " predicted " << r.predicted_busbw_GBps);
    if (r.point->size_bytes >= (1 << 20)) REQUIRE(std::abs(r.error_pct) <= 15.0);
    if (r.point->size_bytes >= (64 << 20)) REQUIRE(std::abs(r.error_pct) <= 10.0);
    checked += r.point->size_bytes >= (1 << 20) ? 1 : 0;
  }
  REQUIRE(checked == 10);  // 2 MiB .. 4 GiB: the sweep's sizes from 1 MiB that are not calibration
}

}  // namespace

TEST_CASE("8x A100 all-reduce: within 15% from 1 MiB, 10% from 64 MiB", "[validate]") {
  require_sweep_within_bounds("a100-8gpu-all_reduce");
}

TEST_CASE("8x H100 all-reduce: within 15% from 1 MiB, 10% from 64 MiB", "[validate]") {
  require_sweep_within_bounds("h100-8gpu-all_reduce");
}

TEST_CASE("lone points: 2 DGX A100 nodes near 192 GB/s, H100 ring near 370, 40 GB A100 at 10 GiB", "[validate]") {
  for (const char* id : {"a100-2node-8hdr", "h100-8gpu-ring", "a100-40gb-8gpu-10GiB"}) {
    const auto& r = point(id);
    INFO(id << " measured " << r.point->busbw_GBps << " predicted " << r.predicted_busbw_GBps);
    REQUIRE(std::abs(r.error_pct) <= 10.0);
  }
  REQUIRE(point("h100-8gpu-ring").algorithm == "ring");
  REQUIRE(point("a100-2node-8hdr").algorithm == "ring");
}

TEST_CASE("a planted wrong measurement shows as a large error", "[validate]") {
  auto planted = dataset();
  for (auto& p : planted.points) {
    if (p.id == "a100-8gpu-all_reduce@1073741824") p.busbw_GBps *= 1.5;
  }
  const auto r = validate::evaluate(planted, run::default_collective_config(), sim::NetworkKind::analytical);
  bool found = false;
  for (const auto& x : r) {
    if (x.point->id == "a100-8gpu-all_reduce@1073741824") {
      found = true;
      REQUIRE(x.error_pct < -30.0);  // predicted ~ 1/1.5 of the planted value
    }
  }
  REQUIRE(found);
}

TEST_CASE("malformed dataset files are clear errors", "[validate]") {
  using Catch::Matchers::Contains;
  const std::string bad = std::string(std::getenv("FORESIGHT_TEST_DATA")) + "/bad/validate/";
  REQUIRE_THROWS_WITH(validate::load_nccl_dataset(bad + "unknown_key.json"),
                      Contains("/series/0/colour") && Contains("unknown key"));
  REQUIRE_THROWS_WITH(validate::load_nccl_dataset(bad + "length_mismatch.json"),
                      Contains("/series/0/busbw_GBps") && Contains("expected 3 values"));
  REQUIRE_THROWS_WITH(validate::load_nccl_dataset(bad + "calibration_size.json"),
                      Contains("calibration size 12345 is not one of the series' sizes"));
  REQUIRE_THROWS_WITH(validate::load_nccl_dataset(bad + "bad_op.json"),
                      Contains("/points/0/op") && Contains("all_reducee"));
  REQUIRE_THROWS_WITH(run::load_calibration(bad + "calibration_negative.json"),
                      Contains("/collectives/profiles/0/efficiency/LL") && Contains("positive"));
  REQUIRE_THROWS_AS(validate::load_nccl_dataset(bad + "missing.json"), sim::ConfigError);
}
