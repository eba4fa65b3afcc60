#include "common/large_vector.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>

namespace foresight::sim::detail {

void* map_huge(std::size_t bytes, std::size_t huge_from) {
#if defined(MAP_ANONYMOUS)
  // Map one huge page more than asked, then return the slack before the first 2 MiB boundary and
  // after the block.
  const std::size_t span = bytes + kHugePageBytes;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + kHugePageBytes - 1) & ~(std::uintptr_t{kHugePageBytes} - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const std::uintptr_t tail = start + span - (aligned + bytes);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  // A hint: failure changes nothing.
  if (bytes > huge_from) madvise(static_cast<char*>(p) + huge_from, bytes - huge_from, MADV_HUGEPAGE);
#else
  (void)huge_from;
#endif
  return p;
#else
  (void)huge_from;
  return ::operator new(bytes, std::align_val_t{kHugePageBytes});
#endif
}

void unmap_huge(void* p, std::size_t bytes) noexcept {
#if defined(MAP_ANONYMOUS)
  munmap(p, bytes);
#else
  (void)bytes;
  ::operator delete(p, std::align_val_t{kHugePageBytes});
#endif
}

}  // namespace foresight::sim::detail
