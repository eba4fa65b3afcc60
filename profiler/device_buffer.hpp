#pragma once
/// Device memory owned by one object, for the micro-benchmarks (built with CUDA).

#include <cstddef>
#include <cstdint>
#include <optional>

namespace foresight::prof {

/// `bytes` of device memory on the device current at allocation (cudaMalloc), freed with the
/// object; move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// nullopt when the device has not `bytes` free (the benchmark is then not measured); any
  /// other CUDA failure throws sim::Error. Zero bytes allocate nothing.
  static std::optional<DeviceBuffer> allocate(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  /// Fills the buffer with finite random elements `element_bytes` wide (random_fill.hpp): one
  /// host block of at most 16 MiB, copied over the buffer; synchronous.
  void fill_finite(int element_bytes, std::uint64_t seed);

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace foresight::prof
