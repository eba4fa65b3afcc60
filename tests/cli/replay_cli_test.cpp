// foresight replay and import-profile as a user meets them: a trace's step replayed beside its
// measurement, on another GPU model, several ranks jointly, and a trace's GEMMs as a profile.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_run.hpp"
#include "tests/test_paths.hpp"

using foresight::test::run_foresight;
using foresight::test::scratch;

TEST_CASE("foresight replay: a Kineto trace's step rebuilt and simulated beside its measurement", "[cli][replay]") {
  const std::string t = foresight::test::data_path("traces/mini_kineto.json");
  const auto r = run_foresight("replay " + t + " --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["step"] == 2);
  REQUIRE(j["gpu_ops"] == 3);
  REQUIRE(j["nccl_ops"] == 1);
  REQUIRE(j["measured_s"].get<double>() == Approx(1e-3));
  REQUIRE(j["replayed_s"].get<double>() == Approx(1e-3));
  // Step 1 ran back to back before it: replayed first, both in the window, each within 0.1%.
  REQUIRE(j["window"].size() == 2);
  for (const auto& s : j["window"]) REQUIRE(std::abs(s["error_pct"].get<double>()) < 0.1);
  REQUIRE(j["steady_mean"]["steps"] == 1);
  REQUIRE(j["steady_mean"]["replayed_s"].get<double>() == Approx(j["replayed_s"].get<double>()));
  REQUIRE(run_foresight("replay " + t + " --step 0").out.find("ProfilerStep#1") != std::string::npos);
  // --trace: the replayed timeline, the GEMM (400 us) and the NCCL kernel on streams of rank 0.
  const std::string timeline = scratch("replay.trace.json");
  REQUIRE(run_foresight("replay " + t + " --trace " + timeline).status == 0);
  const auto tl = nlohmann::json::parse(std::ifstream(timeline));
  double gemm_us = 0.0;
  int nccl = 0;
  for (const auto& e : tl["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string name = e["name"].get<std::string>();
    if (name.find("sgemm") != std::string::npos) gemm_us += e["dur"].get<double>();
    nccl += name.find("ncclKernel") != std::string::npos;
  }
  REQUIRE(nccl == 2);  // one per step
  REQUIRE(gemm_us == Approx(800.0));  // two GEMMs of their measured 400 us
  const std::string bad = foresight::test::data_path("traces/bad_malformed.json");
  const auto e = run_foresight("replay " + bad);
  REQUIRE(e.status == 1);
  REQUIRE(e.out.find("foresight: error: " + bad + ": malformed JSON at byte") != std::string::npos);
  const auto range = run_foresight("replay " + t + " --step 5");
  REQUIRE(range.status == 1);
  REQUIRE(range.out.find("step index 5 is outside the trace's 2 steps") != std::string::npos);
}

TEST_CASE("foresight replay on a cluster of another GPU model retimes the trace's kernels", "[cli][replay]") {
  const std::string t = foresight::test::data_path("traces/mini_kineto.json");  // an A100-SXM4-40GB
  const auto same = nlohmann::json::parse(run_foresight("replay " + t + " --cluster dgx-a100 --json").out);
  REQUIRE(same["retimed"].is_null());
  const auto r = run_foresight("replay " + t + " --cluster dgx-h100 --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["retimed"]["from"] == "A100-SXM4-40GB");
  REQUIRE(j["retimed"]["to"] == "H100-SXM5-80GB");
  // Achievable HBM: 1555 GB/s x 1.61 / 2.039 on the A100, 2.90 TB/s on the H100.
  const double factor = 1555.0 * (1.61 / 2.039) / 2900.0;
  REQUIRE(j["retimed"]["bandwidth_factor"].get<double>() == Approx(factor));
  REQUIRE(j["retimed"]["scaled"] == 1);  // the GEMM; its copy to the host keeps its time
  REQUIRE(j["retimed"]["link_copies"] == 1);
  // The GEMM is the step's critical path: 400 us measured, 400 x factor on the H100; the
  // all-reduce (timed on NVLink) and the copy follow it, so the GPU finishes sooner, and the
  // host's measured work still ends the step at 1 ms.
  REQUIRE(j["replayed_s"].get<double>() == Approx(1e-3));
  const auto text = run_foresight("replay " + t + " --cluster dgx-h100");
  REQUIRE(text.out.find("kernels retimed from A100-SXM4-40GB to H100-SXM5-80GB (Habitat's wave scaling): 1 scaled") !=
          std::string::npos);
  const auto named = run_foresight("replay " + t + " --cluster dgx-h100 --trace-gpu V100-SXM2-32GB --json");
  REQUIRE(nlohmann::json::parse(named.out)["retimed"]["from"] == "V100-SXM2-32GB");
  const auto bad = run_foresight("replay " + t + " --cluster dgx-h100 --trace-gpu V200");
  REQUIRE(bad.status == 1);
  REQUIRE(bad.out.find("--trace-gpu: expected a catalog GPU name") != std::string::npos);
}

TEST_CASE("foresight replay of several ranks' traces replays them jointly", "[cli][replay]") {
  const std::string archive = foresight::test::shared_path("validation/traces/param/dlrm_kineto.tar.gz");
  if (archive.empty()) {
    WARN("skipped: ../shared/validation/traces is absent");
    return;
  }
  const auto r = run_foresight("replay " + archive + " --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["ranks"].size() == 8);
  REQUIRE(j["shared_clock"] == true);
  REQUIRE(j["matched_collectives"] == 8);
  double abs_sum = 0.0;
  for (const auto& rank : j["ranks"]) {
    const double e = rank["error_pct"].get<double>();
    REQUIRE(e == Approx((rank["replayed_s"].get<double>() / rank["measured_s"].get<double>() - 1.0) * 100.0));
    abs_sum += std::abs(e);
  }
  REQUIRE(j["mape_pct"].get<double>() == Approx(abs_sum / 8));
  REQUIRE(j["mape_pct"].get<double>() < 5.0);
  const auto text = run_foresight("replay " + archive);
  REQUIRE(text.out.find("8 ranks of 8 (Tesla V100-SXM2-32GB), ProfilerStep#10") != std::string::npos);
  const auto gpus = run_foresight("replay " + archive + " --cluster dgx-a100 --gpus 4");
  REQUIRE(gpus.status == 1);
  REQUIRE(gpus.out.find("--gpus: a joint replay runs one GPU per trace, expected 8, found 4") != std::string::npos);
}

TEST_CASE("foresight import-profile: a trace's GEMMs become a profile database that simulate uses", "[cli][replay]") {
  const std::string t = foresight::test::data_path("traces/shapes_kineto.json");
  const std::string db = scratch("imported-profile.json");
  const auto r = run_foresight("import-profile " + t + " --gpu A100-SXM4-40GB -o " + db);
  INFO(r.out);
  REQUIRE(r.status == 0);
  REQUIRE(r.out.find("3 kernels from 3 matrix operator instances") != std::string::npos);
  // small_ddp.json's classifier is the trace's fp16 linear layer (32 x 512 -> 100): its forward,
  // input-gradient and weight-gradient GEMMs take the measured times.
  const std::string s = foresight::test::data_path("scenarios/small_ddp.json");
  const auto with = nlohmann::json::parse(run_foresight("simulate " + s + " --profile " + db + " --json").out);
  REQUIRE(with["simulation"]["kernels_profiled"] == 3);
  const auto bad = run_foresight("import-profile " + t + " --gpu A100 -o " + scratch("never.json"));
  REQUIRE(bad.status == 1);
  REQUIRE(bad.out.find("--gpu: expected a catalog GPU name") != std::string::npos);
  REQUIRE_FALSE(std::ifstream(scratch("never.json")).good());
}

TEST_CASE("foresight replay reports the GPU's unexplained stalls and --keep-stalls keeps them", "[cli][replay]") {
  // Kernel A runs 5-105 on stream 7; kernel C, launched at 10-15 on the same stream, began only at
  // 400 with nothing recorded to wait for; the host synchronizes, then works until 1000. Replayed,
  // C follows A (105-155) and the step is 155 + the 550 us of host work after the sync.
  const std::string t = foresight::test::data_path("traces/stall_kineto.json");
  const auto text = run_foresight("replay " + t);
  REQUIRE(text.status == 0);
  REQUIRE(text.out.find("stalls      0.295 ms of GPU idle with work queued and nothing recorded to wait for (1 stall; "
                        "the longest 0.295 ms on stream 7 at 0.105 ms, before kernel C)") != std::string::npos);
  const auto plain = nlohmann::json::parse(run_foresight("replay " + t + " --json").out);
  REQUIRE(plain["replayed_s"].get<double>() == Approx(705e-6));
  REQUIRE(plain["stalls_kept"] == false);
  REQUIRE(plain["unexplained_stalls"]["count"] == 1);
  REQUIRE(plain["unexplained_stalls"]["total_s"].get<double>() == Approx(295e-6));
  REQUIRE(plain["unexplained_stalls"]["largest"][0]["before"] == "kernel C");
  // Kept as GPU time, C begins at 400 as measured and the step is the measured 1000 us.
  const auto kept = nlohmann::json::parse(run_foresight("replay " + t + " --keep-stalls --json").out);
  REQUIRE(kept["stalls_kept"] == true);
  REQUIRE(kept["replayed_s"].get<double>() == Approx(1000e-6));
}

TEST_CASE("foresight simulate --chakra-out writes per-rank Chakra ETs that replay to the simulated schedule", "[cli][replay]") {
  namespace fs = std::filesystem;
  const std::string scenario = foresight::test::source_path("examples/gpt2-1f1b-4stages.json");
  const std::string dir = scratch("chakra-out");
  fs::remove_all(dir);
  const auto s = run_foresight("simulate " + scenario + " --chakra-out " + dir + " --json");
  REQUIRE(s.status == 0);
  // One ET per rank and the comm-group file ASTRA-sim's --comm-group-configuration takes.
  for (int r = 0; r < 4; ++r) REQUIRE(fs::is_regular_file(dir + "/gpt2-1f1b-4stages." + std::to_string(r) + ".et"));
  REQUIRE(nlohmann::json::parse(std::ifstream(dir + "/gpt2-1f1b-4stages.comm_groups.json")).is_object());
  REQUIRE(!fs::exists(dir + ".tmp-chakra"));
  // Replayed on the recorded cluster and network: the simulated schedule, to the microsecond.
  const auto r = run_foresight("replay " + dir + " --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["format"] == "chakra");
  REQUIRE(j["ranks"] == 4);
  REQUIRE(j["unused_attributes"].empty());
  REQUIRE(j["replayed_s"].get<double>() == Approx(j["recorded_s"].get<double>()).margin(1e-6));
  REQUIRE(j["transfers"].get<int>() > 0);
  // One rank's file names the whole workload; text output says what it compared.
  const auto t = run_foresight("replay " + dir + "/gpt2-1f1b-4stages.2.et");
  REQUIRE(t.status == 0);
  REQUIRE(t.out.find("4 ranks, Chakra ET schema 0.0.4, written by foresight simulate") != std::string::npos);
  REQUIRE(t.out.find("replayed    ") != std::string::npos);
  // An existing, non-empty directory is refused before any simulation; Kineto's flags are refused.
  const auto again = run_foresight("simulate " + scenario + " --chakra-out " + dir);
  REQUIRE(again.status == 1);
  REQUIRE(again.out.find("expected a new or empty directory") != std::string::npos);
  const auto step = run_foresight("replay " + dir + " --step 1");
  REQUIRE(step.status == 1);
  REQUIRE(step.out.find("--step: applies to Kineto traces, not to Chakra ETs") != std::string::npos);
  // A missing rank file is named.
  fs::remove(dir + "/gpt2-1f1b-4stages.1.et");
  const auto missing = run_foresight("replay " + dir);
  REQUIRE(missing.status == 1);
  REQUIRE(missing.out.find("rank 1 missing") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("foresight replay of a PyTorch execution trace: its ops costed from their shapes on the cluster", "[cli][replay]") {
  const std::string et = foresight::test::data_path("traces/tiny_host_et.json");
  const auto r = run_foresight("replay " + et + " --json --network analytical");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["format"] == "pytorch_et");
  REQUIRE(j["schema"] == "1.1.0-chakra.0.0.4");
  REQUIRE(j["ranks"] == 1);
  REQUIRE(j["timing"] == "modelled");
  REQUIRE(j["ops"] == 3);
  REQUIRE(j["kernels"] == 3);
  REQUIRE(j["gemms"] == 1);
  REQUIRE(j["host_syncs"] == 1);
  REQUIRE(j["recorded_s"].is_null());
  // The host's part alone is 24 us (tests/traces/pytorch_et_test.cpp); the kernels add to it.
  REQUIRE(j["iteration_s"].get<double>() > 24e-6);
  REQUIRE(j["replayed_s"][0] == j["iteration_s"]);
  // On another cluster its kernels are costed for that cluster's GPU.
  const std::string v100 = foresight::test::source_path("validate/data/topologies/v100-8gpu.json");
  const auto v = run_foresight("replay " + et + " --network analytical --cluster " + v100);
  REQUIRE(v.status == 0);
  REQUIRE(v.out.find("kernels timed from their shapes by the V100-SXM2-32GB compute model") != std::string::npos);
  REQUIRE(v.out.find("cluster     v100-8gpu (8 GPUs), analytical network") != std::string::npos);
  const auto text = run_foresight("replay " + et);
  REQUIRE(text.status == 0);
  REQUIRE(text.out.find("1 rank, PyTorch execution trace schema 1.1.0-chakra.0.0.4 (host only)") != std::string::npos);
  REQUIRE(text.out.find("3 kernels (1 GEMMs, 0 convolutions, 0 attention, 2 memory-bound)") != std::string::npos);
  // Kineto's flags are refused, and a trace of another kind cannot join.
  const auto step = run_foresight("replay " + et + " --step 1");
  REQUIRE(step.status == 1);
  REQUIRE(step.out.find("--step: applies to Kineto traces, not to PyTorch execution traces") != std::string::npos);
  const auto mixed = run_foresight("replay " + et + " " + foresight::test::data_path("traces/mini_kineto.json"));
  REQUIRE(mixed.status == 1);
  REQUIRE(mixed.out.find("PyTorch execution traces and Kineto traces cannot be replayed together") != std::string::npos);
}
