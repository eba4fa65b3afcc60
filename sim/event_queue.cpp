#include "sim/event_queue.hpp"

#include <fmt/core.h>

#include <bit>

#include "common/error.hpp"

namespace foresight::sim {
namespace {

/// Bucket-0 order: `a` runs after `b`.
bool later_at_same_time(const Event& a, const Event& b) noexcept {
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.seq > b.seq;
}

/// `a` runs before `b` at the same time.
bool sooner_at_same_time(const Event& a, const Event& b) noexcept { return later_at_same_time(b, a); }

bool earlier(const Event& a, const Event& b) noexcept {
  if (a.time != b.time) return a.time < b.time;
  return later_at_same_time(b, a);
}

std::uint64_t bits(Time t) noexcept { return static_cast<std::uint64_t>(t.ps()); }

}  // namespace

int EventQueue::bucket_of(Time t) const noexcept {
  const std::uint64_t diff = bits(t) ^ bits(last_);
  return diff == 0 ? 0 : 64 - std::countl_zero(diff);
}

std::uint64_t EventQueue::push(Time time, std::int32_t prio, HandlerId target, std::uint32_t kind,
                               std::uint64_t data) {
  if (time < last_ || time < Time::zero()) {
    throw InternalError(fmt::format("EventQueue::push: time {} is before the last popped event's {}", to_string(time),
                                    to_string(last_)));
  }
  const std::uint64_t seq = next_seq_++;
  const Event e{time, prio, kind, target, seq, data};
  const int b = bucket_of(time);
  if (b == 0) {
    if (now_.size() == head_) {  // every event of this instant so far has run
      now_.clear();
      head_ = 0;
    }
    if (now_.size() == head_ || now_.back().priority <= prio) {
      now_.push_back(e);  // the latest of its priority, and no higher priority is queued
    } else {
      // Before the queued events of a higher priority (its sequence is the highest yet).
      const auto at = std::upper_bound(now_.begin() + static_cast<std::ptrdiff_t>(head_), now_.end(), e,
                                       sooner_at_same_time);
      now_.insert(at, e);
    }
  } else {
    buckets_[static_cast<std::size_t>(b)].push_back(e);
    occupied_ |= std::uint64_t{1} << (b - 1);
  }
  ++size_;
  return seq;
}

void EventQueue::refill() {
  if (occupied_ == 0) return;
  const int b = std::countr_zero(occupied_) + 1;
  std::vector<Event> moving;
  moving.swap(buckets_[static_cast<std::size_t>(b)]);
  occupied_ &= ~(std::uint64_t{1} << (b - 1));
  Time least = moving.front().time;
  for (const Event& e : moving) least = std::min(least, e.time);
  last_ = least;
  for (const Event& e : moving) {
    const int to = bucket_of(e.time);  // below b: they agree with last_ on every higher bit
    if (to == 0) {
      now_.push_back(e);
    } else {
      buckets_[static_cast<std::size_t>(to)].push_back(e);
      occupied_ |= std::uint64_t{1} << (to - 1);
    }
  }
  std::sort(now_.begin(), now_.end(), sooner_at_same_time);
  moving.clear();
  buckets_[static_cast<std::size_t>(b)].swap(moving);  // keep the capacity for the next fill
}

Event EventQueue::pop() {
  if (size_ == 0) throw InternalError("EventQueue::pop on an empty queue");
  if (now_.size() == head_) {
    now_.clear();
    head_ = 0;
    auto& next = buckets_[static_cast<std::size_t>(std::countr_zero(occupied_) + 1)];
    if (next.size() == 1) {  // alone in its bucket: it is the next event (the common case of a short queue)
      const Event e = next.back();
      next.pop_back();
      occupied_ &= ~(std::uint64_t{1} << std::countr_zero(occupied_));
      last_ = e.time;
      --size_;
      return e;
    }
    refill();
  }
  const Event e = now_[head_++];
  --size_;
  return e;
}

Event EventQueue::top() const {
  if (size_ == 0) throw InternalError("EventQueue::top on an empty queue");
  if (now_.size() > head_) return now_[head_];
  const auto& next = buckets_[static_cast<std::size_t>(std::countr_zero(occupied_) + 1)];
  return *std::min_element(next.begin(), next.end(), earlier);
}

}  // namespace foresight::sim
