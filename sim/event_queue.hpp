#pragma once
/// The event queue, ordered by (time, priority, insertion sequence), so that equal-time events
/// run in a fixed order and every run is deterministic, bit for bit.

#include <algorithm>
#include <array>
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
/// Runs after the instant's settle: sees the rates every change of that instant has led to.
inline constexpr std::int32_t after_settle = settle + 1;
}  // namespace priority

/// A radix heap (Ahuja, Mehlhorn, Orlin and Tarjan 1990) on event times, which never go below the
/// last popped time in a simulation: bucket 0 holds the events at that time, sorted on
/// (priority, sequence); bucket b > 0 those whose time first differs from it in bit b - 1,
/// unordered. Popping from an empty bucket 0 moves the next non-empty bucket's events down by
/// its smallest time, sorting those that land in bucket 0. Each event moves down at most 64
/// times, and the buckets a pop touches are few and small, so a large population costs far less
/// than a comparison heap's log n cache misses per event. An event pushed at the current time
/// has the highest sequence yet, so it goes after every queued event of its priority: at the
/// end, or before the few of a higher priority (an instant's settle). The order is exactly
/// (time, priority, sequence).
class EventQueue {
 public:
  /// Inserts an event; amortized O(1) plus the bucket moves. Returns the sequence number it was
  /// given. InternalError when `time` is earlier than the last popped event's.
  std::uint64_t push(Time time, std::int32_t prio, HandlerId target, std::uint32_t kind,
                     std::uint64_t data);
  /// Removes and returns the earliest event; the queue must not be empty.
  Event pop();
  /// The earliest event (a copy), without removing it; the queue must not be empty.
  Event top() const;
  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  void reserve(std::size_t n) { now_.reserve(std::min<std::size_t>(n, 1024)); }

 private:
  static constexpr int kBuckets = 65;
  int bucket_of(Time t) const noexcept;
  /// Moves the first non-empty bucket's events down, setting last_ to their smallest time.
  void refill();

  std::vector<Event> now_;  ///< bucket 0: events at last_ from head_ on, sorted on (priority, sequence)
  std::size_t head_ = 0;    ///< now_'s first event not yet popped
  std::array<std::vector<Event>, kBuckets> buckets_;  ///< [0] unused
  std::uint64_t occupied_ = 0;  ///< bit b - 1 set when buckets_[b] is not empty
  Time last_;
  std::size_t size_ = 0;
  std::uint64_t next_seq_ = 0;
};

}  // namespace foresight::sim
