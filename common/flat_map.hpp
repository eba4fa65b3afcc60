#pragma once
/// FlatMap<K, V, Hash>: an insert-only hash map for small tables looked up far more often than
/// they grow, such as a rank's kernels, found once per kernel of every micro-batch. Open
/// addressing with linear probing in one array (a power of two of slots, at most half full),
/// so a lookup reads one or two cache lines; std::unordered_map follows a bucket pointer and a
/// node pointer, and while a large graph streams through the cache both miss.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace foresight {

template <typename K, typename V, typename Hash>
class FlatMap {
 public:
  /// The value of `key`, made by `make()` and inserted when absent (if `make` throws, nothing
  /// changes). The reference is valid until the next insertion.
  template <typename Make>
  V& get_or_make(const K& key, Make&& make) {
    if (!slots_.empty()) {
      for (std::size_t i = home(key);; i = (i + 1) & (slots_.size() - 1)) {
        Slot& s = slots_[i];
        if (!s.used) break;
        if (s.key == key) return s.value;
      }
    }
    V value = std::forward<Make>(make)();
    if (2 * (size_ + 1) > slots_.size()) grow();
    Slot& s = free_slot(key);
    s = Slot{key, std::move(value), true};
    ++size_;
    return s.value;
  }
  std::size_t size() const { return size_; }

 private:
  struct Slot {
    K key{};
    V value{};
    bool used = false;
  };
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
  int shift_ = 64;  ///< 64 - log2(slots)

  /// The key's first slot: the top bits of its hash times 2^64 / phi (Fibonacci hashing, so
  /// that hashes differing only in high or low bits still spread).
  std::size_t home(const K& key) const {
    const std::uint64_t h = static_cast<std::uint64_t>(Hash{}(key)) * 0x9e3779b97f4a7c15ull;
    return static_cast<std::size_t>(h >> shift_);
  }
  Slot& free_slot(const K& key) {
    std::size_t i = home(key);
    while (slots_[i].used) i = (i + 1) & (slots_.size() - 1);
    return slots_[i];
  }
  void grow() {
    std::vector<Slot> old = std::exchange(slots_, std::vector<Slot>(slots_.empty() ? 16 : slots_.size() * 2));
    shift_ = 64;
    for (std::size_t n = slots_.size(); n > 1; n >>= 1) --shift_;
    for (Slot& s : old) {
      if (s.used) free_slot(s.key) = std::move(s);
    }
  }
};

}  // namespace foresight
