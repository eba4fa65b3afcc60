#include "common/large_vector.hpp"

#include <sys/mman.h>
#include <unistd.h>

namespace foresight::sim::detail {

void hint_huge_pages(void* p, std::size_t bytes) noexcept {
#ifdef MADV_HUGEPAGE
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(p) & ~(page - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(p) + bytes;
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // a hint: failure changes nothing
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace foresight::sim::detail
