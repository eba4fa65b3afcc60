#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "common/unit_parser.hpp"
#include "common/units.hpp"

using namespace foresight::sim;
using namespace foresight::sim::literals;

TEST_CASE("time literals and arithmetic are exact picoseconds", "[sim]") {
  REQUIRE((1_us).ps() == 1'000'000);
  REQUIRE((2_ms + 3_us).ps() == 2'003'000'000);
  REQUIRE((1_s).seconds() == Approx(1.0));
  REQUIRE(Time::from_seconds(1.5e-6) == 1500_ns);
  REQUIRE((10_us / 4).ps() == 2'500'000);
  REQUIRE(1_ns < 1_us);
}

TEST_CASE("transfer_time rounds bytes over bandwidth up to the next picosecond", "[sim]") {
  // 1 GB at 1 GB/s is exactly one second.
  REQUIRE(transfer_time(Bytes(1'000'000'000), Bandwidth::gigabytes_per_second(1.0)) == 1_s);
  // 1 byte at 3 B/s = 333333333333.33 ps -> rounded up.
  REQUIRE(transfer_time(1.0, Bandwidth::bytes_per_second(3.0)).ps() == 333'333'333'334);
  // 200 Gb/s is 25 GB/s: 25 MB take 1 ms.
  REQUIRE(transfer_time(25_MB, 200_Gbps) == 1_ms);
  REQUIRE_THROWS_AS(transfer_time(1.0, Bandwidth{}), InternalError);
  REQUIRE(compute_time(Flops(312e12), FlopRate::tera(312)) == 1_s);
}

TEST_CASE("the unit parser reads times", "[sim]") {
  REQUIRE(parse_time("2 us", "t") == 2_us);
  REQUIRE(parse_time("1.5ms", "t") == 1500_us);
  REQUIRE(parse_time("  300 ns ", "t") == 300_ns);
  REQUIRE(parse_time("10 s", "t") == 10_s);
  REQUIRE(parse_time("7 ps", "t") == 7_ps);
  REQUIRE(parse_time("3 \xC2\xB5s", "t") == 3_us);
  REQUIRE(parse_time("1e-3 s", "t") == 1_ms);
}

TEST_CASE("the unit parser reads sizes, decimal and binary", "[sim]") {
  REQUIRE(parse_bytes("1.5 GiB", "b") == Bytes(1'610'612'736));
  REQUIRE(parse_bytes("25 MB", "b") == Bytes(25'000'000));
  REQUIRE(parse_bytes("4096", "b") == Bytes(4096));
  REQUIRE(parse_bytes("1K", "b") == Bytes(1024));      // nccl-tests shorthand is binary
  REQUIRE(parse_bytes("8G", "b") == Bytes(8LL << 30));
  REQUIRE(parse_bytes("0.1 GB", "b") == Bytes(100'000'000));
}

TEST_CASE("the unit parser reads bandwidths in bytes and bits", "[sim]") {
  REQUIRE(parse_bandwidth("25 GB/s", "bw").bytes_per_second() == Approx(25e9));
  REQUIRE(parse_bandwidth("200 Gb/s", "bw").bytes_per_second() == Approx(25e9));
  REQUIRE(parse_bandwidth("200 Gbit/s", "bw").bytes_per_second() == Approx(25e9));
  REQUIRE(parse_bandwidth("1.5 TB/s", "bw").bytes_per_second() == Approx(1.5e12));
  REQUIRE(parse_bandwidth("1 GiB/s", "bw").bytes_per_second() == Approx(1073741824.0));
  REQUIRE(parse_flop_rate("312 TFLOP/s", "f").per_second() == Approx(312e12));
  REQUIRE(parse_flop_rate("19.5 TFLOPS", "f").per_second() == Approx(19.5e12));
}

TEST_CASE("the unit parser rejects bad units, missing units and negative values", "[sim]") {
  using Catch::Matchers::Contains;
  REQUIRE_THROWS_WITH(parse_bandwidth("25 GB", "cfg.json: /links/0/bandwidth"),
                      Contains("cfg.json: /links/0/bandwidth") && Contains("unknown unit \"GB\"") &&
                          Contains("GB/s"));
  REQUIRE_THROWS_WITH(parse_bandwidth("25", "x"), Contains("no unit"));
  REQUIRE_THROWS_WITH(parse_time("-2 us", "--latency"),
                      Contains("--latency") && Contains("non-negative") && Contains("-2 us"));
  REQUIRE_THROWS_WITH(parse_bytes("-1 MiB", "x"), Contains("non-negative"));
  REQUIRE_THROWS_WITH(parse_time("fast", "x"), Contains("no number"));
  REQUIRE_THROWS_WITH(parse_time("", "x"), Contains("empty"));
  REQUIRE_THROWS_WITH(parse_time("2 parsecs", "x"), Contains("unknown unit"));
  REQUIRE_THROWS_WITH(parse_bytes("1.3 B", "x"), Contains("whole number of bytes"));
  REQUIRE_THROWS_WITH(parse_time("1e300 s", "x"), Contains("range"));
  REQUIRE_THROWS_WITH(parse_bandwidth("nan GB/s", "x"), Contains("not finite"));
  REQUIRE_THROWS_AS(parse_flop_rate("3 FLOP", "x"), ConfigError);
}

TEST_CASE("a finite number that overflows with its unit is rejected, not made infinite", "[sim]") {
  using Catch::Matchers::Contains;
  // Found by fuzz_topology's read-back check (fuzz/corpus/topology/bandwidth-overflow.TopologyError):
  // "1e300 GB/s" read as an infinite bandwidth, which the topology export wrote as "inf GB/s".
  REQUIRE_THROWS_WITH(parse_bandwidth("1e300 GB/s", "x"), Contains("1e300 GB/s") && Contains("range"));
  REQUIRE_THROWS_AS(parse_flop_rate("1e300 PFLOP/s", "x"), ConfigError);
  REQUIRE(parse_bandwidth("1.7e308 B/s", "x").bytes_per_second() == 1.7e308);  // finite as written
}
