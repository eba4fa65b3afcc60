#pragma once
/// The executor's interpreter locks: one per simulated process (Python's GIL). A host thread
/// takes its process's lock for the GIL-held part of an op; a lock that is held queues the
/// thread, first come, first served. Releasing a lock hands the turn (not the lock) to the
/// longest waiter, which takes it when it resumes.

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace foresight::sim::detail {

class InterpreterLocks {
 public:
  InterpreterLocks(std::size_t processes, std::size_t hosts) : locks_(processes), queued_(hosts, 0) {}

  /// Host `h` takes process `p`'s lock (true), or is queued for it once (false).
  bool try_take(std::uint32_t p, std::uint32_t h);
  /// Releases process `p`'s lock; the host whose turn it is now, if one waits.
  std::optional<std::uint32_t> release(std::uint32_t p);

 private:
  struct Lock {
    bool held = false;
    std::deque<std::uint32_t> waiters;
  };
  std::vector<Lock> locks_;
  std::vector<std::uint8_t> queued_;  ///< per host: waiting for its process's lock
};

}  // namespace foresight::sim::detail
