// Result files appear whole or not at all: after a writer's error, a discarded file, or a process
// killed (SIGKILL) half way through writing, the folder holds exactly what it held before.
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "tests/test_files.hpp"

namespace fs = std::filesystem;
using foresight::sim::ConfigError;
using foresight::sim::PendingFile;
using foresight::sim::write_file_atomically;
using foresight::test::listing;
using foresight::test::slurp;

namespace {

/// A writer that writes `bytes` bytes of 'x' in pieces of 1000.
auto writes(std::size_t bytes) {
  return [bytes](std::ostream& out) {
    const std::string piece(1000, 'x');
    for (std::size_t done = 0; done < bytes; done += piece.size()) out << piece.substr(0, std::min(piece.size(), bytes - done));
  };
}

}  // namespace

TEST_CASE("write_file_atomically: the whole text, nothing else left in the folder", "[atomic_file]") {
  const fs::path dir = foresight::test::fresh_dir("atomic-whole");
  const std::string target = (dir / "out.txt").string();
  write_file_atomically(target, "first\n");
  CHECK(slurp(target) == "first\n");
  write_file_atomically(target, writes(3'000'000));  // larger than the stream's buffer
  CHECK(slurp(target) == std::string(3'000'000, 'x'));
  CHECK(listing(dir) == std::set<std::string>{"out.txt"});
  // Permissions as for any new file: the umask's.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  CHECK((fs::status(target).permissions() & fs::perms::all) == static_cast<fs::perms>(0666 & ~mask));
  fs::remove_all(dir);
}

TEST_CASE("write_file_atomically: a writer that throws leaves the old file and no other", "[atomic_file]") {
  const fs::path dir = foresight::test::fresh_dir("atomic-throws");
  const std::string target = (dir / "out.txt").string();
  write_file_atomically(target, "old\n");
  CHECK_THROWS_WITH(write_file_atomically(target,
                                          [](std::ostream& out) {
                                            out << std::string(200'000, 'y');
                                            throw std::runtime_error("half way");
                                          }),
                    "half way");
  CHECK(slurp(target) == "old\n");
  CHECK(listing(dir) == std::set<std::string>{"out.txt"});
  fs::remove_all(dir);
}

TEST_CASE("PendingFile: nothing under its name until committed; discarded when dropped", "[atomic_file]") {
  const fs::path dir = foresight::test::fresh_dir("atomic-pending");
  const std::string a = (dir / "a.txt").string();
  const std::string b = (dir / "b.txt").string();
  {
    PendingFile pa(a, writes(5000));
    PendingFile pb(b, writes(7000));
    CHECK(listing(dir).empty());  // both written, neither visible
    pa.commit();
    CHECK(listing(dir) == std::set<std::string>{"a.txt"});
    CHECK_THROWS_AS(pa.commit(), foresight::sim::InternalError);
  }  // pb dropped uncommitted
  CHECK(listing(dir) == std::set<std::string>{"a.txt"});
  CHECK(slurp(a).size() == 5000);
  // Moved, the file commits once from its new owner.
  PendingFile moved = PendingFile(b, writes(10));
  moved.commit();
  CHECK(slurp(b) == std::string(10, 'x'));
  fs::remove_all(dir);
}

TEST_CASE("write_file_atomically: a folder that does not exist is named in the error", "[atomic_file]") {
  const fs::path dir = foresight::test::fresh_dir("atomic-missing");
  const std::string target = (dir / "no-such-folder" / "out.txt").string();
  CHECK_THROWS_AS(write_file_atomically(target, "x"), ConfigError);
  try {
    write_file_atomically(target, "x");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find(target) != std::string::npos);
  }
  CHECK(listing(dir).empty());
  fs::remove_all(dir);
}

TEST_CASE("write_file_atomically: a device is written, not replaced", "[atomic_file]") {
  write_file_atomically("/dev/null", "nothing\n");
  CHECK(fs::is_character_file("/dev/null"));
}

TEST_CASE("write_file_atomically: a process killed half way leaves the folder as it was", "[atomic_file]") {
  const fs::path dir = foresight::test::fresh_dir("atomic-killed");
  const std::string target = (dir / "out.txt").string();
  write_file_atomically(target, "old\n");
  for (const int sig : {SIGKILL, SIGINT, SIGTERM}) {
    INFO("signal " << sig);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // The default action of each signal: the process ends where it stands, no handler runs.
      ::signal(sig, SIG_DFL);
      try {
        write_file_atomically(target, [sig](std::ostream& out) {
          out << std::string(1'000'000, 'z');
          out.flush();
          ::raise(sig);
        });
      } catch (...) {
      }
      ::_exit(0);  // not reached
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig);
    CHECK(slurp(target) == "old\n");
    CHECK(listing(dir) == std::set<std::string>{"out.txt"});
  }
  fs::remove_all(dir);
}
