#include "profiler/device_buffer.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "profiler/detail/cuda_check.hpp"
#include "profiler/random_fill.hpp"

namespace foresight::prof {

std::optional<DeviceBuffer> DeviceBuffer::allocate(std::size_t bytes) {
  DeviceBuffer b;
  if (bytes == 0) return b;
  const cudaError_t e = cudaMalloc(&b.ptr_, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear it: the context is still usable
    return std::nullopt;
  }
  detail::check_cuda(e, "cudaMalloc");
  b.bytes_ = bytes;
  return b;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::fill_finite(int element_bytes, std::uint64_t seed) {
  constexpr std::size_t kBlockBytes = 16u << 20;
  // A whole number of elements, so the pattern's element boundaries hold in every copy.
  const auto width = static_cast<std::size_t>(std::max(element_bytes, 1));
  const std::size_t block = std::max(width, std::min(bytes_, kBlockBytes) / width * width);
  const std::vector<std::uint8_t> host = finite_random_bytes(block, element_bytes, seed);
  auto* dst = static_cast<std::uint8_t*>(ptr_);
  for (std::size_t at = 0; at < bytes_; at += block) {
    detail::check_cuda(cudaMemcpy(dst + at, host.data(), std::min(block, bytes_ - at), cudaMemcpyHostToDevice),
                       "cudaMemcpy (benchmark data)");
  }
}

}  // namespace foresight::prof
