#pragma once
/// A CUDA library's opaque descriptor (a pointer type created and destroyed by C functions)
/// owned by a unique_ptr, for the profiler's CUDA sources.

#include <memory>
#include <type_traits>

namespace foresight::prof::detail {

template <typename Handle, auto Destroy>
struct Destroyer {
  void operator()(Handle h) const { Destroy(h); }
};

/// Owned<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>: destroys the descriptor once.
template <typename Handle, auto Destroy>
using Owned = std::unique_ptr<std::remove_pointer_t<Handle>, Destroyer<Handle, Destroy>>;

}  // namespace foresight::prof::detail
