#pragma once
/// Storage for the simulator's largest arrays: one entry per execution-graph node (the graph, the
/// executor's state, the result's times) and a node's list of dependencies.
///
/// LargeVector<T> is a std::vector whose blocks of 2 MiB or more are whole transparent huge pages:
/// mapped from the kernel, aligned to 2 MiB, rounded up to whole 2 MiB pages and marked
/// MADV_HUGEPAGE before anything touches them (detail::map_huge). Filling a fresh block faults
/// once per page; with 2 MiB pages instead of 4 KiB ones that is 512 times fewer faults, and on a
/// virtual machine each fault is dear: a 290,000-node graph of the GPipe example ran in 0.64 s
/// with 4 KiB pages and 0.31 s with huge pages (measured on this project's 2-core build machine,
/// transparent_hugepage=madvise). Blocks malloc'ed and then marked, as before 2026-11-27, got a
/// huge page only where one fitted whole, and faulted the rest 4 KiB at a time: the SC21
/// 3072-GPU row took 62 k faults instead of 23 k. Where the kernel offers no huge pages the hint
/// is ignored. The graph's own nodes (ChunkedVector) take 4 KiB pages since 2026-11-29: see
/// common/chunked_vector.hpp.
///
/// DepList holds a node's dependencies: up to three inline (nearly every node has one or two), more
/// on the heap, so a graph of millions of nodes does not make millions of small allocations.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>
#include <vector>

namespace foresight::sim {

namespace detail {
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;
/// `bytes` (a multiple of kHugePageBytes) of fresh memory aligned to kHugePageBytes, mapped
/// from the kernel rather than malloc'ed, and marked for transparent huge pages from byte
/// `huge_from` (a multiple of kHugePageBytes) on: no allocator touches it (glibc's
/// MALLOC_PERTURB_, which Meson sets for tests, would write every byte of a malloc'ed block), so
/// only the pages used become resident. Throws std::bad_alloc.
void* map_huge(std::size_t bytes, std::size_t huge_from = 0);
/// Returns a block of map_huge(bytes).
void unmap_huge(void* p, std::size_t bytes) noexcept;
}  // namespace detail

template <typename T>
struct LargeAllocator {
  using value_type = T;
  LargeAllocator() noexcept = default;
  template <typename U>
  LargeAllocator(const LargeAllocator<U>& /*other*/) noexcept {}
  /// Blocks of 2 MiB or more are whole 2 MiB pages, aligned (detail::map_huge), so that every page
  /// of them can be a huge one: a malloc'ed block gets huge pages only where one fits whole, and
  /// the rest of it faults 4 KiB at a time.
  T* allocate(std::size_t n) {
    if (n > (std::size_t(-1) - detail::kHugePageBytes) / sizeof(T)) throw std::bad_array_new_length();
    if (n * sizeof(T) < detail::kHugePageBytes) return std::allocator<T>().allocate(n);
    return static_cast<T*>(detail::map_huge(rounded(n)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < detail::kHugePageBytes) {
      std::allocator<T>().deallocate(p, n);
      return;
    }
    detail::unmap_huge(p, rounded(n));
  }
  /// The bytes of n elements, rounded up to whole huge pages.
  static std::size_t rounded(std::size_t n) {
    return (n * sizeof(T) + detail::kHugePageBytes - 1) / detail::kHugePageBytes * detail::kHugePageBytes;
  }
  template <typename U>
  bool operator==(const LargeAllocator<U>& /*other*/) const noexcept {
    return true;
  }
};

template <typename T>
using LargeVector = std::vector<T, LargeAllocator<T>>;

/// A short list of 32-bit ids in 16 bytes: up to three inline, more on the heap (their pointer
/// then takes the inline words; the capacity is the size rounded up to a power of two).
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
  std::uint32_t* data() noexcept { return on_heap() ? heap() : words_; }
  const std::uint32_t* data() const noexcept { return on_heap() ? heap() : words_; }
  iterator begin() noexcept { return data(); }
  iterator end() noexcept { return data() + size_; }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + size_; }
  std::uint32_t operator[](std::size_t i) const noexcept { return data()[i]; }
  std::uint32_t& operator[](std::size_t i) noexcept { return data()[i]; }
  std::uint32_t back() const noexcept { return data()[size_ - 1]; }
  void clear() noexcept { release(); }
  void push_back(std::uint32_t id) {
    if (size_ < kInline) {
      words_[size_++] = id;
      return;
    }
    if (size_ == kInline || (size_ & (size_ - 1)) == 0) {  // full: inline, or a power of two on the heap
      auto* bigger = new std::uint32_t[size_ == kInline ? std::size_t{4} : std::size_t{size_} * 2];
      std::copy(begin(), end(), bigger);
      const std::uint32_t n = size_;
      release();
      set_heap(bigger);
      size_ = n;
    }
    heap()[size_++] = id;
  }
  bool operator==(const DepList& o) const noexcept { return std::equal(begin(), end(), o.begin(), o.end()); }
  /// As a std::vector (for code that keeps one).
  std::vector<std::uint32_t> to_vector() const { return {begin(), end()}; }

 private:
  static constexpr std::uint32_t kInline = 3;
  bool on_heap() const noexcept { return size_ > kInline; }
  std::uint32_t* heap() const noexcept {
    std::uint32_t* p = nullptr;
    std::memcpy(&p, words_, sizeof(p));
    return p;
  }
  void set_heap(std::uint32_t* p) noexcept { std::memcpy(words_, &p, sizeof(p)); }
  void assign(const std::uint32_t* first, const std::uint32_t* last) {
    const auto n = static_cast<std::uint32_t>(last - first);
    if (n <= kInline) {
      std::uint32_t copy[kInline] = {};
      std::copy(first, last, copy);  // `first` may point into this list
      release();
      std::copy(copy, copy + n, words_);
    } else {
      std::uint32_t cap = 4;
      while (cap < n) cap *= 2;
      auto* p = new std::uint32_t[cap];
      std::copy(first, last, p);
      release();
      set_heap(p);
    }
    size_ = n;
  }
  /// Frees the heap list, if any, and empties the list.
  void release() noexcept {
    if (on_heap()) delete[] heap();
    size_ = 0;
  }
  void take(DepList& o) noexcept {
    std::memcpy(words_, o.words_, sizeof(words_));
    size_ = o.size_;
    o.size_ = 0;
  }
  std::uint32_t words_[kInline] = {};
  std::uint32_t size_ = 0;
};
static_assert(sizeof(DepList) == 16, "DepList: three ids inline, or a heap pointer, and the size");

}  // namespace foresight::sim
