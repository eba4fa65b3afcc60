// foresight validate from the command line: every dataset with its error, the JSON, Markdown and
// plot outputs, --only and --skip, exit 1 past a threshold, and --calibrate's refit.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_run.hpp"
#include "tests/test_files.hpp"
#include "tests/test_paths.hpp"

using foresight::test::run_foresight;
using foresight::test::scratch;

TEST_CASE("foresight validate: every dataset with its error, JSON, Markdown and plot; exit 1 past a threshold",
          "[cli][validate]") {
  const std::string md = scratch("validation.md");
  const std::string svg = scratch("validation.svg");
  // The two slowest datasets (the SC21 rows, the published runs) have Meson tests of their own
  // through this same command (validate/foresight_validate_sc21, _runs): left out here.
  const auto r = run_foresight("validate --no-traces --skip megatron_sc21_table1,published_runs --markdown " + md +
                               " --plot " + svg);
  INFO(r.out);
  REQUIRE(r.status == 0);
  for (const char* s : {"== thetagpu_resnet18_ddp: MAPE", "== thetagpu_resnet18_gpipe: MAPE", "== nccl_busbw: MAPE",
                        "== gemm_and_memory: MAPE", "== h200_steps_analytical: MAPE",
                        "== h200_steps_profile: MAPE", "== h200_steps_replay: MAPE", "== h200_kernels_gemm: MAPE",
                        "== h200_kernels_memory: MAPE", "== h100_steps_analytical: MAPE", "== h100_gemm: MAPE",
                        "== h100_kernels_gemm: MAPE", "== h100_gemm_alignment: MAPE", "19 datasets, 19 passed, 0 failed"}) {
    REQUIRE(r.out.find(s) != std::string::npos);
  }
  REQUIRE(r.out.find("== published_runs") == std::string::npos);
  std::ifstream m(md);
  const std::string markdown((std::istreambuf_iterator<char>(m)), std::istreambuf_iterator<char>());
  REQUIRE(markdown.find("![predicted vs measured](validation.svg)") != std::string::npos);
  REQUIRE(std::filesystem::file_size(svg) > 1000);
  // The JSON goes to its file; progress lines ("validate: [1/3] ...") stay on stderr. A suite of
  // three quick datasets: the whole one above already took most of this test's time.
  const std::string data = foresight::test::data_path("../../validate/data/");
  const std::string quick = scratch("quick-suite.json");
  std::ofstream(quick) << nlohmann::json{{"description", "quick"},
                                         {"datasets",
                                          {{{"name", "thetagpu_resnet18_ddp"}, {"kind", "thetagpu_ddp"},
                                            {"file", data + "thetagpu_resnet18_cifar100.json"}, {"goal_pct", 10},
                                            {"threshold_pct", 10}},
                                           {{"name", "nccl_busbw"}, {"kind", "nccl_busbw"},
                                            {"file", data + "nccl_busbw.json"}, {"goal_pct", 10}, {"threshold_pct", 10}},
                                           {{"name", "h100_gemm_alignment"}, {"kind", "kernel_sweep_gemm"},
                                            {"file", data + "kernels/h100_gemm_align.json"}, {"goal_pct", 10},
                                            {"threshold_pct", 20}, {"note", "as the shipped suite"}}}}}
                               .dump();
  const std::string json_path = scratch("validation.json");
  const auto j = run_foresight("validate --no-traces --suite " + quick + " --json -o " + json_path);
  INFO(j.out);
  REQUIRE(j.status == 0);
  REQUIRE(j.out.find("validate: [3/3] h100_gemm_alignment: MAPE") != std::string::npos);
  // With a traces folder (one that is absent: each trace dataset skips, saying why) the count
  // takes in the three trace datasets.
  const auto t = run_foresight("validate --traces " + scratch("no-such-traces") + " --suite " + quick + " --json -o " +
                               scratch("with-traces.json"));
  INFO(t.out);
  REQUIRE(t.status == 0);
  REQUIRE(t.out.find("validate: [6/6] execution_traces: skipped") != std::string::npos);
  const auto doc = nlohmann::json::parse(foresight::test::slurp(json_path));
  REQUIRE(doc.at("datasets").size() == 3);
  REQUIRE(doc.at("datasets").at(0).at("threshold_pct") == 10);
  int calibration = 0;  // the alignment dataset's two declared rows keep their role in the JSON
  for (const auto& c : doc.at("datasets").at(2).at("cases")) calibration += c.at("role") == "calibration" ? 1 : 0;
  REQUIRE(calibration == 2);

  // A suite whose threshold the model misses: exit 1, the dataset named, the report still printed.
  const std::string suite = scratch("strict-suite.json");
  std::ofstream(suite) << nlohmann::json{{"description", "strict"},
                                         {"datasets", {{{"name", "strict_nccl"}, {"kind", "nccl_busbw"},
                                                        {"file", data + "nccl_busbw.json"}, {"goal_pct", 1},
                                                        {"threshold_pct", 1}}}}}
                              .dump();
  const auto strict = run_foresight("validate --no-traces --suite " + suite);
  INFO(strict.out);
  REQUIRE(strict.status == 1);
  REQUIRE(strict.out.find("foresight: validation failed: strict_nccl (MAPE") != std::string::npos);
  REQUIRE(strict.out.find("1 datasets, 0 passed, 1 failed") != std::string::npos);
  // --only and --skip pick datasets by name; an unknown name lists the suite's.
  const auto only = run_foresight("validate --no-traces --suite " + quick + " --only nccl_busbw,thetagpu_resnet18_ddp");
  REQUIRE(only.status == 0);
  REQUIRE(only.out.find("2 datasets, 2 passed, 0 failed") != std::string::npos);
  REQUIRE(only.out.find("h100_gemm_alignment") == std::string::npos);
  const auto skip = run_foresight("validate --no-traces --suite " + quick + " --skip nccl_busbw");
  REQUIRE(skip.status == 0);
  REQUIRE(skip.out.find("== nccl_busbw") == std::string::npos);
  REQUIRE(skip.out.find("2 datasets, 2 passed, 0 failed") != std::string::npos);
  const auto unknown = run_foresight("validate --suite " + quick + " --only nccl");
  REQUIRE(unknown.status == 1);
  REQUIRE(unknown.out.find("--only: expected a dataset of " + quick +
                           " (thetagpu_resnet18_ddp, nccl_busbw, h100_gemm_alignment), found \"nccl\"") !=
          std::string::npos);
  const auto missing = run_foresight("validate --suite /nonexistent/suite.json");
  REQUIRE(missing.status == 1);
  REQUIRE(missing.out.find("foresight: error: /nonexistent/suite.json") != std::string::npos);
}

TEST_CASE("foresight validate --calibrate refits the stored constants from the calibration cases", "[cli][calibrate]") {
  // The refit takes the whole suite's calibration cases; --skip leaves the two slowest datasets
  // out of the validation after it (Megatron SC21's constant is still refitted, below).
  const std::string out = scratch("calibration.json");
  const auto r =
      run_foresight("validate --calibrate --no-traces --skip published_runs,megatron_sc21_table1 --calibration " + out);
  INFO(r.out);
  REQUIRE(r.status == 0);
  REQUIRE(r.out.find("== published_runs") == std::string::npos);
  REQUIRE(r.out.find("== megatron_sc21_table1") == std::string::npos);
  REQUIRE(r.out.find("== thetagpu_resnet18_ddp") != std::string::npos);
  std::ifstream a(out);
  std::ifstream b(foresight::test::data_path("../../validate/data/calibration.json"));
  const auto fitted = nlohmann::json::parse(a);
  const auto stored = nlohmann::json::parse(b);
  REQUIRE(fitted.at("thetagpu_gpipe") == stored.at("thetagpu_gpipe"));
  REQUIRE(fitted.at("thetagpu_ddp").at("fitted_on") == stored.at("thetagpu_ddp").at("fitted_on"));
  REQUIRE(fitted.at("thetagpu_ddp").at("input_rate").get<double>() ==
          Approx(stored.at("thetagpu_ddp").at("input_rate").get<double>()).epsilon(1e-6));
  REQUIRE(fitted.at("compute") == stored.at("compute"));
  REQUIRE(fitted.at("megatron_sc21").at("fitted_on") == nlohmann::json{"gpt-1.7b-32gpu"});
  REQUIRE(fitted.at("megatron_sc21").at("gemm_efficiency").get<double>() ==
          Approx(stored.at("megatron_sc21").at("gemm_efficiency").get<double>()).epsilon(1e-6));
  REQUIRE(fitted.at("collectives").at("profiles").size() == stored.at("collectives").at("profiles").size());
}
