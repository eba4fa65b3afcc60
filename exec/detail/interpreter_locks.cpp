#include "exec/detail/interpreter_locks.hpp"

namespace foresight::sim::detail {

bool InterpreterLocks::try_take(std::uint32_t p, std::uint32_t h) {
  Lock& lock = locks_[p];
  if (lock.held) {
    if (queued_[h] == 0) {
      queued_[h] = 1;
      lock.waiters.push_back(h);
    }
    return false;
  }
  lock.held = true;
  queued_[h] = 0;
  return true;
}

std::optional<std::uint32_t> InterpreterLocks::release(std::uint32_t p) {
  Lock& lock = locks_[p];
  lock.held = false;
  if (lock.waiters.empty()) return std::nullopt;
  const std::uint32_t h = lock.waiters.front();  // the longest waiter goes first
  lock.waiters.pop_front();
  queued_[h] = 0;
  return h;
}

}  // namespace foresight::sim::detail
