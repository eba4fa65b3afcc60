#pragma once
/// ChunkedVector<T>: a sequence that grows in chunks of at least 2^15 elements and never moves
/// what it holds. A std::vector that doubles copies every element into a fresh block, so a graph of 8 M
/// nodes (900 MB) writes about twice its size into newly faulted pages; on this project's 2-core
/// build machine the 3072-GPU SC21 row spent a fifth of its time zeroing those pages. Appending
/// here writes each element once; element addresses stay valid as it grows.
///
/// Indexing costs one more load (the chunk's address) than a vector's. Chunks are mapped from the
/// kernel (detail::map_huge), aligned to 2 MiB and sized to whole 2 MiB blocks: their element
/// count is the smallest power of two from 2^15 whose bytes are a multiple of 2 MiB (2^18 nodes of
/// 104 bytes, 26 MiB); only the pages a graph touches are resident. They take 4 KiB pages, not
/// transparent huge pages: the graph is written once and read mostly in order, so huge pages
/// save little translation, while on this project's virtual machine each fresh 2 MiB page cost
/// a slow first touch. The 3072-GPU SC21 row took 2.19-2.30 s (0.55-0.71 s of system time) with
/// huge-page chunks and 1.82-1.85 s (0.13-0.17 s) without, in interleaved runs on one core
/// (2026-11-29); GPT-3 175B (flow) and the MoE benchmark (analytical) moved by 0.01-0.03 s. On
/// 2026-11-27 whole huge pages had been a third faster there than chunks of a huge page and 1.25
/// MiB of 4 KiB pages (62 k faults against 23 k): the machine's state decides, and the system
/// time varied from run to run with them.

#include <cstddef>
#include <iterator>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/large_vector.hpp"

namespace foresight::sim {

template <typename T>
class ChunkedVector {
  static constexpr unsigned kShift = [] {
    unsigned k = 15;
    while (k < 21 && ((std::size_t{1} << k) * sizeof(T)) % detail::kHugePageBytes != 0) ++k;
    return k;
  }();
  static constexpr std::size_t kChunk = std::size_t{1} << kShift;
  static constexpr std::size_t kMask = kChunk - 1;

 public:
  /// Elements per chunk.
  static constexpr std::size_t chunk_elements = kChunk;
  using value_type = T;
  using size_type = std::size_t;
  using reference = T&;
  using const_reference = const T&;

  template <bool Const>
  class Iter {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = std::conditional_t<Const, const T*, T*>;
    using reference = std::conditional_t<Const, const T&, T&>;
    using Owner = std::conditional_t<Const, const ChunkedVector, ChunkedVector>;

    Iter() = default;
    Iter(Owner* v, std::size_t i) : v_(v), i_(i) {}
    operator Iter<true>() const { return {v_, i_}; }  // NOLINT(google-explicit-constructor)

    reference operator*() const { return (*v_)[i_]; }
    pointer operator->() const { return &(*v_)[i_]; }
    reference operator[](difference_type d) const { return (*v_)[i_ + static_cast<std::size_t>(d)]; }
    Iter& operator++() { ++i_; return *this; }
    Iter operator++(int) { Iter t = *this; ++i_; return t; }
    Iter& operator--() { --i_; return *this; }
    Iter operator--(int) { Iter t = *this; --i_; return t; }
    Iter& operator+=(difference_type d) { i_ += static_cast<std::size_t>(d); return *this; }
    Iter& operator-=(difference_type d) { i_ -= static_cast<std::size_t>(d); return *this; }
    friend Iter operator+(Iter a, difference_type d) { return a += d; }
    friend Iter operator+(difference_type d, Iter a) { return a += d; }
    friend Iter operator-(Iter a, difference_type d) { return a -= d; }
    friend difference_type operator-(const Iter& a, const Iter& b) {
      return static_cast<difference_type>(a.i_) - static_cast<difference_type>(b.i_);
    }
    friend bool operator==(const Iter& a, const Iter& b) { return a.i_ == b.i_; }
    friend auto operator<=>(const Iter& a, const Iter& b) { return a.i_ <=> b.i_; }

   private:
    Owner* v_ = nullptr;
    std::size_t i_ = 0;
  };
  using iterator = Iter<false>;
  using const_iterator = Iter<true>;

  ChunkedVector() = default;
  ChunkedVector(const ChunkedVector& o) { append_all(o); }
  ChunkedVector(ChunkedVector&& o) noexcept : chunks_(std::move(o.chunks_)), size_(std::exchange(o.size_, 0)) {}
  ChunkedVector& operator=(const ChunkedVector& o) {
    if (this != &o) {
      clear();
      append_all(o);
    }
    return *this;
  }
  ChunkedVector& operator=(ChunkedVector&& o) noexcept {
    if (this != &o) {
      clear();
      chunks_ = std::move(o.chunks_);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~ChunkedVector() { clear(); }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T& operator[](std::size_t i) noexcept { return chunks_[i >> kShift][i & kMask]; }
  const T& operator[](std::size_t i) const noexcept { return chunks_[i >> kShift][i & kMask]; }
  T& front() noexcept { return (*this)[0]; }
  const T& front() const noexcept { return (*this)[0]; }
  T& back() noexcept { return (*this)[size_ - 1]; }
  const T& back() const noexcept { return (*this)[size_ - 1]; }
  iterator begin() noexcept { return {this, 0}; }
  iterator end() noexcept { return {this, size_}; }
  const_iterator begin() const noexcept { return {this, 0}; }
  const_iterator end() const noexcept { return {this, size_}; }

  template <typename... Args>
  T& emplace_back(Args&&... args) {
    if ((size_ & kMask) == 0 && (size_ >> kShift) == chunks_.size()) {
      // 4 KiB pages throughout (no huge-page hint: it starts at the chunk's end), see above.
      const std::size_t bytes = LargeAllocator<T>::rounded(kChunk);
      chunks_.reserve(chunks_.size() + 1);  // so that nothing throws once the chunk is mapped
      chunks_.push_back(static_cast<T*>(detail::map_huge(bytes, bytes)));
    }
    T* slot = &chunks_[size_ >> kShift][size_ & kMask];
    ::new (static_cast<void*>(slot)) T(std::forward<Args>(args)...);
    ++size_;
    return *slot;
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  /// Destroys the last element (its chunk stays for the next one).
  void pop_back() noexcept {
    back().~T();
    --size_;
  }

  void clear() noexcept {
    for (std::size_t i = 0; i < size_; ++i) (*this)[i].~T();
    for (T* c : chunks_) detail::unmap_huge(c, LargeAllocator<T>::rounded(kChunk));
    chunks_.clear();
    size_ = 0;
  }

 private:
  void append_all(const ChunkedVector& o) {
    for (const T& v : o) emplace_back(v);
  }
  std::vector<T*> chunks_;
  std::size_t size_ = 0;
};

}  // namespace foresight::sim
