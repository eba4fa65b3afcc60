// The project's transcriptions (nccl_busbw.json, megatron_sc21_table1.json) equal the shared
// measured files. Skipped (exit 77, which Meson reports as SKIP) when ../shared is absent.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/test_paths.hpp"
#include "validate/megatron_dataset.hpp"
#include "validate/nccl_dataset.hpp"

using namespace foresight;

TEST_CASE("the transcribed nccl-tests numbers equal ../shared/validation/nccl_busbw.json", "[validate]") {
  const std::string shared = test::shared_path("validation/nccl_busbw.json");
  if (shared.empty()) {
    std::puts("SKIP: ../shared/validation/nccl_busbw.json is absent");
    std::exit(77);
  }
  std::ifstream in(shared);
  const auto src = nlohmann::json::parse(in);
  const auto ds = validate::load_nccl_dataset(validate::data_dir() + "/nccl_busbw.json");
  std::size_t compared = 0;
  for (const auto& block : src.at("blocks")) {
    const auto sizes = block.at("size_bytes");
    const auto busbw = block.at("busbw_GBps");
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      bool found = false;
      for (const auto& p : ds.points) {
        if (p.system == block.at("system").get<std::string>() && p.size_bytes == sizes[k].get<double>()) {
          REQUIRE(p.busbw_GBps == busbw[k].get<double>());
          REQUIRE(p.source == block.at("source").get<std::string>());
          found = true;
        }
      }
      REQUIRE(found);
      ++compared;
    }
  }
  REQUIRE(compared == 48);
}

TEST_CASE("the transcribed Megatron SC21 rows equal ../shared/validation/megatron_sc21_table1.json", "[validate]") {
  const std::string shared = test::shared_path("validation/megatron_sc21_table1.json");
  if (shared.empty()) {
    std::puts("SKIP: ../shared/validation/megatron_sc21_table1.json is absent");
    std::exit(77);
  }
  std::ifstream in(shared);
  const auto src = nlohmann::json::parse(in).at("runs");
  const auto ds = validate::load_megatron_dataset(validate::data_dir() + "/megatron_sc21_table1.json");
  REQUIRE(ds.runs.size() == src.size());
  for (std::size_t i = 0; i < src.size(); ++i) {
    const auto& s = src[i];
    const auto& r = ds.runs[i];
    INFO(r.id);
    REQUIRE(r.tflops_per_gpu == s.at("tflops_per_gpu").get<double>());
    REQUIRE(r.params_b == s.at("params_b").get<double>());
    REQUIRE(r.tp == s.at("tp").get<int>());
    REQUIRE(r.pp == s.at("pp").get<int>());
    REQUIRE(r.gpus == s.at("gpus").get<int>());
    REQUIRE(r.hidden == s.at("hidden").get<int>());
    REQUIRE(r.layers == s.at("layers").get<int>());
    REQUIRE(r.heads == s.at("heads").get<int>());
    REQUIRE(r.global_batch == s.at("global_batch").get<int>());
    REQUIRE(r.micro_batch == s.at("micro_batch").get<int>());
  }
}
