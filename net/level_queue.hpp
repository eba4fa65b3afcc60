#pragma once
/// An indexed binary min-heap of ids keyed by a double, one entry per id, updated in place:
/// progressive filling's candidate link levels (net/flow_network.cpp). The lowest value comes
/// first, and at equal values the lower id, so the order is a function of the keys alone.

#include <cstdint>
#include <limits>
#include <vector>

namespace foresight::sim {

class LevelQueue {
 public:
  /// Empties the queue and makes room for ids below `ids`.
  void clear(std::size_t ids) {
    for (const std::uint32_t id : heap_) pos_[id] = kNone;
    heap_.clear();
    if (pos_.size() < ids) {
      pos_.resize(ids, kNone);
      value_.resize(ids, 0.0);
    }
  }
  bool empty() const noexcept { return heap_.empty(); }
  std::size_t size() const noexcept { return heap_.size(); }
  std::uint32_t top() const { return heap_.front(); }
  double top_value() const { return value_[heap_.front()]; }
  bool contains(std::uint32_t id) const { return pos_[id] != kNone; }

  /// Inserts `id` with `value`, or moves it to `value`.
  void set(std::uint32_t id, double value) {
    value_[id] = value;
    if (pos_[id] == kNone) {
      pos_[id] = static_cast<std::uint32_t>(heap_.size());
      heap_.push_back(id);
      up(pos_[id]);
    } else {
      up(pos_[id]);
      down(pos_[id]);
    }
  }
  /// Removes `id` if present.
  void erase(std::uint32_t id) {
    const std::uint32_t i = pos_[id];
    if (i == kNone) return;
    pos_[id] = kNone;
    const std::uint32_t last = heap_.back();
    heap_.pop_back();
    if (i == heap_.size()) return;
    heap_[i] = last;
    pos_[last] = i;
    up(i);
    down(pos_[last]);
  }

 private:
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

  bool before(std::uint32_t a, std::uint32_t b) const {
    return value_[a] != value_[b] ? value_[a] < value_[b] : a < b;
  }
  void place(std::uint32_t i, std::uint32_t id) {
    heap_[i] = id;
    pos_[id] = i;
  }
  void up(std::uint32_t i) {
    const std::uint32_t id = heap_[i];
    while (i > 0) {
      const std::uint32_t parent = (i - 1) / 2;
      if (!before(id, heap_[parent])) break;
      place(i, heap_[parent]);
      i = parent;
    }
    place(i, id);
  }
  void down(std::uint32_t i) {
    const std::uint32_t id = heap_[i];
    const auto n = static_cast<std::uint32_t>(heap_.size());
    for (;;) {
      std::uint32_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
      if (!before(heap_[child], id)) break;
      place(i, heap_[child]);
      i = child;
    }
    place(i, id);
  }

  std::vector<std::uint32_t> heap_;
  std::vector<std::uint32_t> pos_;  ///< place of each id in heap_, kNone when absent
  std::vector<double> value_;
};

}  // namespace foresight::sim
