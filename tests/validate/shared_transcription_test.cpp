// The project's transcription of nccl_busbw.json equals the shared measured file. Skipped (exit
// 77, which Meson reports as SKIP) when ../shared is absent.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/test_paths.hpp"
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
