// foresight sweep beyond one machine: --shard I/N with sweep-merge, and --mpi under mpirun. Both
// must write what the threaded sweep writes, byte for byte; bad shards and bad flags are refused
// with a message naming what is wrong, and no output file.
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/cli/cli_run.hpp"
#include "tests/test_files.hpp"
#include "tests/test_paths.hpp"

namespace {

namespace fs = std::filesystem;
using foresight::test::Run;
using foresight::test::slurp;

/// A fresh, empty scratch folder for one test case (the cli suite's parts run in parallel).
fs::path fresh_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / "foresight-cli-test" / ("distributed-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

Run shell(const fs::path& dir, const std::string& command) { return foresight::test::shell_in(dir.string(), command); }

std::string exe() {
  const char* e = std::getenv("FORESIGHT_EXE");
  REQUIRE(e != nullptr);
  return e;
}

Run foresight_in(const fs::path& dir, const std::string& args) {
  return shell(dir, exe() + " " + args);
}

/// Six configurations of the small DDP scenario (ResNet-18, well under a second each), the same
/// options for every way of running them.
std::string sweep_args() {
  return "sweep " + foresight::test::data_path("scenarios/small_ddp.json") +
         " --gpus 2,4,8 --micro-batch 16,32";
}

std::size_t lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

/// mpirun as CI can run it: as root, more ranks than cores, shared memory only (no network), and
/// bounded by timeout so that a hang fails the test instead of the suite. Empty: built without MPI.
std::string mpirun(int ranks) {
  const char* path = std::getenv("FORESIGHT_MPIRUN");
  if (path == nullptr || std::string(path).empty()) return {};
  return "OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1 "
         "timeout 120 " +
         std::string(path) +
         " --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader -n " +
         std::to_string(ranks) + " ";
}

}  // namespace

TEST_CASE(
    "sweep --shard I/N: the shards, merged, are the single-machine CSV and plot byte for byte",
    "[cli][distributed]") {
  const auto dir = fresh_dir("shards");
  const Run whole = foresight_in(dir, sweep_args() + " --jobs 2 --csv whole.csv --plot whole.svg");
  INFO(whole.out);
  REQUIRE(whole.status == 0);
  const std::string expected = slurp(dir / "whole.csv");
  REQUIRE(lines(expected) == 1 + 6);

  // Four shards of six configurations: 0 and 1 get two (0, 4 and 1, 5), 2 and 3 one each.
  for (int i = 0; i < 4; ++i) {
    const Run shard =
        foresight_in(dir, sweep_args() + " --jobs 1 --shard " + std::to_string(i) + "/4");
    INFO(shard.out);
    REQUIRE(shard.status == 0);
  }
  const std::string shard0 = slurp(dir / "sweep-shard-0-of-4.csv");
  REQUIRE(shard0.rfind("# foresight sweep shard 0/4 of 6 configurations, sweep ", 0) == 0);
  REQUIRE(shard0.find("\nconfig,gpus,micro_batch,iteration_time_s,") != std::string::npos);
  REQUIRE(lines(shard0) == 2 + 2);
  REQUIRE(shard0.find("\n0,2,16,") != std::string::npos);
  REQUIRE(shard0.find("\n4,8,16,") != std::string::npos);
  REQUIRE(lines(slurp(dir / "sweep-shard-3-of-4.csv")) == 2 + 1);

  // Any order of the shard files.
  const Run merged =
      foresight_in(dir,
                   "sweep-merge merged.csv sweep-shard-3-of-4.csv sweep-shard-1-of-4.csv "
                   "sweep-shard-0-of-4.csv sweep-shard-2-of-4.csv --plot merged.svg");
  INFO(merged.out);
  REQUIRE(merged.status == 0);
  REQUIRE(merged.out.find("sweep-merge: 4 shards, 6 configurations in merged.csv") !=
          std::string::npos);
  REQUIRE(slurp(dir / "merged.csv") == expected);
  REQUIRE(slurp(dir / "merged.svg") == slurp(dir / "whole.svg"));

  // Rows that failed when simulated are merged as they are; the merge then exits 1, as the sweep.
  const std::string failing =
      "sweep " + foresight::test::data_path("bad/scenarios/pipeline_virtual_stages.json") +
      " --vary plan.virtual_stages=1,2,3,4";
  REQUIRE(foresight_in(dir, failing + " --csv failing.csv").status == 1);
  REQUIRE(foresight_in(dir, failing + " --shard 0/2 --csv failing-0.csv").status ==
          0);  // virtual_stages 1 and 3
  REQUIRE(foresight_in(dir, failing + " --shard 1/2 --csv failing-1.csv").status ==
          1);  // 2 and the failing 4
  const Run failing_merge =
      foresight_in(dir, "sweep-merge failing-merged.csv failing-0.csv failing-1.csv");
  REQUIRE(failing_merge.status == 1);
  REQUIRE(failing_merge.out.find("plan.virtual_stages=4: error: ") != std::string::npos);
  REQUIRE(slurp(dir / "failing-merged.csv") == slurp(dir / "failing.csv"));

  // One shard of one is the whole sweep too.
  REQUIRE(foresight_in(dir, sweep_args() + " --shard 0/1 --csv one.csv").status == 0);
  REQUIRE(foresight_in(dir, "sweep-merge one-merged.csv one.csv").status == 0);
  REQUIRE(slurp(dir / "one-merged.csv") == expected);

  // --resume of a finished shard runs nothing and leaves the file as it was.
  const std::string shard1 = slurp(dir / "sweep-shard-1-of-4.csv");
  const Run resumed = foresight_in(dir, sweep_args() + " --shard 1/4 --resume");
  INFO(resumed.out);
  REQUIRE(resumed.status == 0);
  REQUIRE(resumed.out.find("shard 1/4: 2 of 6 configurations (0 run now, 2 resumed)") !=
          std::string::npos);
  REQUIRE(slurp(dir / "sweep-shard-1-of-4.csv") == shard1);
  // ...but not into another shard's file.
  const Run crossed =
      foresight_in(dir, sweep_args() + " --shard 2/4 --resume --csv sweep-shard-1-of-4.csv");
  REQUIRE(crossed.status == 1);
  REQUIRE(crossed.out.find("resume needs the same sweep and --shard") != std::string::npos);

  // A shard with its last row cut (an interrupted run) is refused and resumed.
  const std::string cut = shard1.substr(0, shard1.rfind('\n', shard1.size() - 2) + 1);
  std::ofstream(dir / "sweep-shard-1-of-4.csv", std::ios::binary) << cut;
  const Run lacking = foresight_in(dir, "sweep-merge lacking.csv sweep-shard-*-of-4.csv");
  REQUIRE(lacking.status == 1);
  REQUIRE(lacking.out.find("sweep-shard-1-of-4.csv: shard 1/4 lacks configuration 5 of 6") !=
          std::string::npos);
  REQUIRE_FALSE(fs::exists(dir / "lacking.csv"));
  const Run finished = foresight_in(dir, sweep_args() + " --shard 1/4 --resume");
  REQUIRE(finished.out.find("(1 run now, 1 resumed)") != std::string::npos);
  REQUIRE(slurp(dir / "sweep-shard-1-of-4.csv") == shard1);
}

TEST_CASE("sweep-merge refuses a missing, duplicated or foreign shard and an existing output",
          "[cli][distributed]") {
  const auto dir = fresh_dir("merge-errors");
  for (int i = 0; i < 3; ++i) {
    REQUIRE(
        foresight_in(dir, sweep_args() + " --jobs 1 --shard " + std::to_string(i) + "/3").status ==
        0);
  }
  // Another sweep (other GPU counts), cut the same way.
  REQUIRE(foresight_in(dir, sweep_args() + ",16 --jobs 1 --shard 1/3 --csv other-1.csv").status ==
          0);
  // The same sweep with another --set: the same columns and count, another fingerprint.
  REQUIRE(foresight_in(dir, sweep_args() +
                                " --set plan.input_rate=4000 --jobs 1 --shard 1/3 --csv set-1.csv")
              .status == 0);
  // The same sweep cut in two.
  REQUIRE(foresight_in(dir, sweep_args() + " --jobs 1 --shard 1/2 --csv half-1.csv").status == 0);
  REQUIRE(foresight_in(dir, sweep_args() + " --jobs 1 --csv whole.csv").status == 0);

  struct Case {
    std::string shards;
    std::string says;
  };
  for (const Case& c : {
           Case{"sweep-shard-0-of-3.csv sweep-shard-2-of-3.csv",
                "shard 1/3 missing: a sweep cut into 3 needs all 3 shard files (0/3 to 2/3), found "
                "2"},
           Case{"sweep-shard-0-of-3.csv", "shards 1/3, 2/3 missing"},
           Case{"sweep-shard-0-of-3.csv sweep-shard-1-of-3.csv sweep-shard-1-of-3.csv "
                "sweep-shard-2-of-3.csv",
                "shard 1/3 given twice: sweep-shard-1-of-3.csv and sweep-shard-1-of-3.csv"},
           Case{"sweep-shard-0-of-3.csv other-1.csv sweep-shard-2-of-3.csv",
                "other-1.csv: a shard of another sweep (sweep "},
           Case{"sweep-shard-0-of-3.csv set-1.csv sweep-shard-2-of-3.csv",
                "set-1.csv: a shard of another sweep"},
           Case{"sweep-shard-0-of-3.csv half-1.csv sweep-shard-2-of-3.csv",
                "half-1.csv: shard 1/2, but sweep-shard-0-of-3.csv is shard 0/3: the shards of one "
                "merge must be cut with "
                "the same N"},
           Case{
               "whole.csv",
               "whole.csv: not a sweep shard: expected a first line \"# foresight sweep shard I/N"},
           Case{"sweep-shard-0-of-3.csv nonexistent.csv", "nonexistent.csv: cannot open"},
       }) {
    const Run r = foresight_in(dir, "sweep-merge out.csv " + c.shards);
    INFO(c.shards << "\n" << r.out);
    REQUIRE(r.status == 1);
    REQUIRE(r.out.find(c.says) != std::string::npos);
    REQUIRE_FALSE(fs::exists(dir / "out.csv"));
  }
  // The fingerprints differ where the columns do not.
  REQUIRE(slurp(dir / "set-1.csv").substr(0, 60) !=
          slurp(dir / "sweep-shard-1-of-3.csv").substr(0, 60));

  const std::string all = "sweep-shard-0-of-3.csv sweep-shard-1-of-3.csv sweep-shard-2-of-3.csv";
  REQUIRE(foresight_in(dir, "sweep-merge out.csv " + all).status == 0);
  REQUIRE(slurp(dir / "out.csv") == slurp(dir / "whole.csv"));
  std::ofstream(dir / "out.csv") << "keep me\n";
  const Run exists = foresight_in(dir, "sweep-merge out.csv " + all);
  REQUIRE(exists.status == 1);
  REQUIRE(exists.out.find("out.csv exists: pass --force to overwrite it") != std::string::npos);
  REQUIRE(slurp(dir / "out.csv") == "keep me\n");
  REQUIRE(foresight_in(dir, "sweep-merge out.csv " + all + " --force").status == 0);
  REQUIRE(slurp(dir / "out.csv") == slurp(dir / "whole.csv"));
}

TEST_CASE("sweep --shard: malformed, 1-based or combined with --mpi or --plot is a usage error",
          "[cli][distributed]") {
  const auto dir = fresh_dir("shard-flags");
  struct Case {
    std::string flags;
    std::string says;
  };
  for (const Case& c : {
           Case{"--shard 2",
                "expected I/N, shard I of N with 0 <= I < N (such as 0/4), found \"2\""},
           Case{"--shard a/b", "found \"a/b\""},
           Case{"--shard 1/0", "found \"1/0\""},
           Case{"--shard 1/+3", "found \"1/+3\""},
           Case{"--shard -1/3", "found \"-1/3\""},
           Case{"--shard 1/2/3", "found \"1/2/3\""},
           Case{"--shard 4/4",
                "shard 4 of 4 does not exist: shards count from 0, expected 0 to 3 (use "
                "--array=0-3 and "
                "--shard $SLURM_ARRAY_TASK_ID/4)"},
           Case{"--shard 0/2 --mpi", "--shard: not with --mpi"},
           Case{"--shard 0/2 --plot p.svg",
                "--shard: not with --plot: a shard holds part of the sweep; plot the merged one "
                "with `foresight sweep-merge"},
       }) {
    const Run r = foresight_in(dir, sweep_args() + " " + c.flags + " --csv never.csv");
    INFO(c.flags << "\n" << r.out);
    REQUIRE(r.status == 2);
    REQUIRE(r.out.find(c.says) != std::string::npos);
    REQUIRE(r.out.find("sweep: [") == std::string::npos);
    REQUIRE_FALSE(fs::exists(dir / "never.csv"));
  }
}

TEST_CASE(
    "sweep --mpi under mpirun -n 2 and -n 3: the single-machine CSV and plot byte for byte, error "
    "rows too",
    "[cli][distributed]") {
  const auto dir = fresh_dir("mpi");
  if (mpirun(1).empty()) {
    // Built without MPI: --mpi says so, and leaves no file.
    const Run r = foresight_in(dir, sweep_args() + " --mpi --csv never.csv");
    REQUIRE(r.status == 1);
    REQUIRE(r.out.find("--mpi: this foresight was built without MPI") != std::string::npos);
    REQUIRE_FALSE(fs::exists(dir / "never.csv"));
    WARN("skipped: this build has no MPI (Meson option mpi; libopenmpi-dev)");
    return;
  }
  const std::string args = sweep_args();
  const Run whole = foresight_in(dir, args + " --jobs 2 --csv whole.csv --plot whole.svg");
  INFO(whole.out);
  REQUIRE(whole.status == 0);
  const std::string expected = slurp(dir / "whole.csv");
  REQUIRE(lines(expected) == 1 + 6);
  for (const int ranks : {2, 3}) {
    const std::string name = "mpi-" + std::to_string(ranks);
    const Run r = shell(dir, mpirun(ranks) + exe() + " " + args + " --mpi --csv " + name +
                                 ".csv --plot " + name + ".svg");
    INFO(ranks << " ranks\n" << r.out);
    REQUIRE(r.status == 0);
    REQUIRE(r.out.find("sweep: [6/6] ") !=
            std::string::npos);  // progress from rank 0 only, once per row
    REQUIRE(r.out.find("sweep: [7/") == std::string::npos);
    REQUIRE(slurp(dir / (name + ".csv")) == expected);
    REQUIRE(slurp(dir / (name + ".svg")) == slurp(dir / "whole.svg"));
  }
  // A configuration that fails when simulated (4 virtual stages do not divide 6 blocks) is its
  // row's error, as in the threaded sweep, whichever rank ran it; both exit 1.
  const std::string failing =
      "sweep " + foresight::test::data_path("bad/scenarios/pipeline_virtual_stages.json") +
      " --vary plan.virtual_stages=1,2,3,4";
  const Run threads = foresight_in(dir, failing + " --csv failing.csv");
  REQUIRE(threads.status == 1);
  const std::string failing_rows = slurp(dir / "failing.csv");
  REQUIRE(failing_rows.find("\n4,,,,,,,,,,,,,,,") != std::string::npos);
  REQUIRE(failing_rows.find("not divisible by 4 virtual stages") != std::string::npos);
  const Run ranks = shell(dir, mpirun(3) + exe() + " " + failing + " --mpi --csv failing-mpi.csv");
  INFO(ranks.out);
  REQUIRE(ranks.status == 1);
  REQUIRE(ranks.out.find(
              "foresight: error: 1 of 4 configurations failed; their rows carry the error") !=
          std::string::npos);
  REQUIRE(slurp(dir / "failing-mpi.csv") == failing_rows);
  // Without mpirun, --mpi is one rank: it runs the sweep itself.
  REQUIRE(foresight_in(dir, args + " --mpi --csv single.csv").status == 0);
  REQUIRE(slurp(dir / "single.csv") == expected);
}

TEST_CASE("sweep --mpi: a bad configuration fails on rank 0 at once, without a hang or a file",
          "[cli][distributed]") {
  const auto dir = fresh_dir("mpi-errors");
  if (mpirun(1).empty()) {
    WARN("skipped: this build has no MPI (Meson option mpi; libopenmpi-dev)");
    return;
  }
  const std::string scenario = foresight::test::data_path("scenarios/small_ddp.json");
  const Run bad =
      shell(dir, mpirun(3) + exe() + " sweep " + scenario + " --gpus 2,x --mpi --csv never.csv");
  INFO(bad.out);
  REQUIRE(bad.status == 1);
  REQUIRE(bad.out.find("foresight: error: sweep configuration gpus=x") != std::string::npos);
  // Printed by rank 0 alone.
  REQUIRE(bad.out.find("sweep configuration gpus=x") ==
          bad.out.rfind("sweep configuration gpus=x"));
  REQUIRE_FALSE(fs::exists(dir / "never.csv"));
  // Every rank running the whole sweep into one file is refused.
  const Run plain = shell(dir, mpirun(2) + exe() + " " + sweep_args() + " --csv never.csv");
  REQUIRE(plain.status != 0);
  REQUIRE(plain.out.find("started as one of 2 MPI processes (mpirun -n 2) without --mpi") !=
          std::string::npos);
  REQUIRE_FALSE(fs::exists(dir / "never.csv"));
}
