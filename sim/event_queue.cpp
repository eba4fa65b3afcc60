#include "sim/event_queue.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace foresight::sim {
namespace {

/// Heap order: `a` sorts after `b` (std heap algorithms build a max-heap of this relation).
bool later(const Event& a, const Event& b) noexcept {
  if (a.time != b.time) return a.time > b.time;
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.seq > b.seq;
}

}  // namespace

std::uint64_t EventQueue::push(Time time, std::int32_t prio, HandlerId target, std::uint32_t kind,
                               std::uint64_t data) {
  const std::uint64_t seq = next_seq_++;
  heap_.push_back(Event{time, prio, kind, target, seq, data});
  std::push_heap(heap_.begin(), heap_.end(), later);
  return seq;
}

Event EventQueue::pop() {
  if (heap_.empty()) throw InternalError("EventQueue::pop on an empty queue");
  std::pop_heap(heap_.begin(), heap_.end(), later);
  Event e = heap_.back();
  heap_.pop_back();
  return e;
}

}  // namespace foresight::sim
