#include "profiler/gemm_layout.hpp"

#include <algorithm>

namespace foresight::prof {

int GemmLayout::alignment_bytes(int input_bytes, int output_bytes) const {
  std::uint64_t align = 16;
  const auto fold = [&](std::uint64_t ld, int bytes) {
    const std::uint64_t b = ld * static_cast<std::uint64_t>(bytes);
    if (b > 0) align = std::min<std::uint64_t>(align, b & (~b + 1));  // the lowest set bit
  };
  fold(a.ld, input_bytes);
  fold(b.ld, input_bytes);
  fold(c.ld, output_bytes);
  return static_cast<int>(align);
}

GemmLayout gemm_layout(const sim::OpSignature& sig) {
  const auto dim = [&](std::size_t i) {
    return i < sig.shape.size() ? static_cast<std::uint64_t>(sig.shape[i]) : 1u;
  };
  const std::uint64_t m = dim(0), n = dim(1), k = dim(2);
  GemmLayout l;
  // cuBLAS computes the transposed output: its m is the signature's n, its n the signature's m.
  l.m = n;
  l.n = m;
  l.k = k;
  l.c = {false, n, m, n};
  const bool fp8 = sig.dtype == sim::DType::fp8;
  if (!fp8 && (sig.batch_axis == 2 || sig.kernel.ends_with("_wgrad"))) {
    l.a = {false, n, k, n};  // X^T: X (k x n row-major) as stored
    l.b = {true, m, k, m};   // dY (k x m row-major), transposed
  } else if (!fp8 && sig.kernel.ends_with("_dgrad")) {
    l.a = {false, n, k, n};  // W (k x n row-major) as stored
    l.b = {false, k, m, k};  // dY (m x k row-major) as stored
  } else {
    l.a = {true, k, n, k};   // W (n x k row-major), transposed
    l.b = {false, k, m, k};  // X (m x k row-major) as stored
  }
  return l;
}

}  // namespace foresight::prof
