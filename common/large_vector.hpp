#pragma once
/// Storage for the simulator's largest arrays: one entry per execution-graph node (the graph, the
/// executor's state, the result's times) and a node's list of dependencies.
///
/// LargeVector<T> is a std::vector whose blocks of 2 MiB or more ask the kernel for transparent
/// huge pages (madvise MADV_HUGEPAGE) before anything touches them. Filling a fresh block faults
/// once per page; with 2 MiB pages instead of 4 KiB ones that is 512 times fewer faults, and on a
/// virtual machine each fault is dear: a 290,000-node graph of the GPipe example ran in 0.64 s
/// with 4 KiB pages and 0.31 s with huge pages (measured on this project's 2-core build machine,
/// transparent_hugepage=madvise). Where the kernel offers no huge pages the hint is ignored.
///
/// DepList holds a node's dependencies: up to four inline (nearly every node has one or two), more
/// on the heap, so a graph of millions of nodes does not make millions of small allocations.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <vector>

namespace foresight::sim {

namespace detail {
/// Asks for transparent huge pages over [p, p + bytes); best effort.
void hint_huge_pages(void* p, std::size_t bytes) noexcept;
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;
}  // namespace detail

template <typename T>
struct LargeAllocator {
  using value_type = T;
  LargeAllocator() noexcept = default;
  template <typename U>
  LargeAllocator(const LargeAllocator<U>& /*other*/) noexcept {}
  T* allocate(std::size_t n) {
    T* p = std::allocator<T>().allocate(n);
    if (n * sizeof(T) >= detail::kHugePageBytes) detail::hint_huge_pages(p, n * sizeof(T));
    return p;
  }
  void deallocate(T* p, std::size_t n) noexcept { std::allocator<T>().deallocate(p, n); }
  template <typename U>
  bool operator==(const LargeAllocator<U>& /*other*/) const noexcept {
    return true;
  }
};

template <typename T>
using LargeVector = std::vector<T, LargeAllocator<T>>;

/// A short list of 32-bit ids, inline up to four.
class DepList {
 public:
  using value_type = std::uint32_t;
  using iterator = std::uint32_t*;
  using const_iterator = const std::uint32_t*;

  DepList() noexcept = default;
  DepList(std::initializer_list<std::uint32_t> ids) { assign(ids.begin(), ids.end()); }
  template <typename A>
  DepList(const std::vector<std::uint32_t, A>& ids) {  // NOLINT(google-explicit-constructor): a list is a list
    assign(ids.data(), ids.data() + ids.size());
  }
  DepList(const DepList& o) { assign(o.begin(), o.end()); }
  DepList(DepList&& o) noexcept { take(o); }
  DepList& operator=(const DepList& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  DepList& operator=(DepList&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  ~DepList() { release(); }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::uint32_t* data() noexcept { return cap_ > kInline ? heap_ : inline_; }
  const std::uint32_t* data() const noexcept { return cap_ > kInline ? heap_ : inline_; }
  iterator begin() noexcept { return data(); }
  iterator end() noexcept { return data() + size_; }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + size_; }
  std::uint32_t operator[](std::size_t i) const noexcept { return data()[i]; }
  std::uint32_t& operator[](std::size_t i) noexcept { return data()[i]; }
  std::uint32_t back() const noexcept { return data()[size_ - 1]; }
  void clear() noexcept { size_ = 0; }
  void push_back(std::uint32_t id) {
    if (size_ == cap_) grow(cap_ * 2);
    data()[size_++] = id;
  }
  bool operator==(const DepList& o) const noexcept { return std::equal(begin(), end(), o.begin(), o.end()); }
  /// As a std::vector (for code that keeps one).
  std::vector<std::uint32_t> to_vector() const { return {begin(), end()}; }

 private:
  static constexpr std::uint32_t kInline = 4;
  void assign(const std::uint32_t* first, const std::uint32_t* last) {
    const auto n = static_cast<std::uint32_t>(last - first);
    size_ = 0;
    if (n > cap_) grow(n);
    std::copy(first, last, data());
    size_ = n;
  }
  void grow(std::uint32_t cap) {
    auto* bigger = new std::uint32_t[cap];
    std::copy(begin(), end(), bigger);
    release();
    heap_ = bigger;
    cap_ = cap;
  }
  void release() noexcept {
    if (cap_ > kInline) delete[] heap_;
    cap_ = kInline;
  }
  void take(DepList& o) noexcept {
    size_ = o.size_;
    cap_ = o.cap_;
    if (o.cap_ > kInline) {
      heap_ = o.heap_;
    } else {
      std::memcpy(inline_, o.inline_, sizeof(inline_));
    }
    o.size_ = 0;
    o.cap_ = kInline;
  }
  union {
    std::uint32_t inline_[kInline] = {};
    std::uint32_t* heap_;
  };
  std::uint32_t size_ = 0;
  std::uint32_t cap_ = kInline;
};

}  // namespace foresight::sim
