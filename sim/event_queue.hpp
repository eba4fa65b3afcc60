#pragma once
/// The event queue: a binary min-heap ordered by (time, priority, insertion sequence), so that
/// equal-time events run in a fixed order and every run is deterministic, bit for bit.

#include <cstdint>
#include <vector>

#include "common/units.hpp"

namespace foresight::sim {

/// Stable identifier of an event handler registered with a Simulator (its registration index).
using HandlerId = std::uint32_t;

/// One scheduled event. `kind` and `data` mean whatever the target handler defines.
struct Event {
  Time time;
  std::int32_t priority = 0;  ///< at equal time, lower runs first
  std::uint32_t kind = 0;
  HandlerId target = 0;
  std::uint64_t seq = 0;  ///< insertion order, assigned by the queue
  std::uint64_t data = 0;
};

/// Priorities with a meaning shared by all models.
namespace priority {
inline constexpr std::int32_t normal = 0;
/// Runs after every normal event of the same instant: used to batch work triggered by many
/// same-time events (e.g. one bandwidth re-solve for all flows that start at that instant).
inline constexpr std::int32_t settle = 1000;
}  // namespace priority

class EventQueue {
 public:
  /// Inserts an event; O(log n). Returns the sequence number it was given.
  std::uint64_t push(Time time, std::int32_t prio, HandlerId target, std::uint32_t kind,
                     std::uint64_t data);
  /// Removes and returns the earliest event; the queue must not be empty.
  Event pop();
  const Event& top() const { return heap_.front(); }
  bool empty() const noexcept { return heap_.empty(); }
  std::size_t size() const noexcept { return heap_.size(); }
  void reserve(std::size_t n) { heap_.reserve(n); }

 private:
  std::vector<Event> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace foresight::sim
