#pragma once
/// Convolution signatures timed through cuDNN (built where cuDNN is found: FORESIGHT_HAVE_CUDNN):
/// cuDNN's convolution API (cudnnConvolutionForward, BackwardData, BackwardFilter) at the
/// signature's exact shape and dtype, with the algorithm cudnnFind*AlgorithmEx measures fastest,
/// as PyTorch runs convolutions with torch.backends.cudnn.benchmark = True.

#include <cstddef>

#include "profiler/bench_timer.hpp"
#include "exec/op_signature.hpp"

struct cudnnContext;  // cuDNN's handle (cudnnHandle_t), kept out of this header

namespace foresight::prof {

class ConvBench {
 public:
  ConvBench();
  ~ConvBench();
  ConvBench(const ConvBench&) = delete;
  ConvBench& operator=(const ConvBench&) = delete;

  /// A conv_fprop, conv_dgrad or conv_wgrad signature {n, c, h, w, k, r, s, stride, pad, groups}
  /// (dilation 1): fprop computes y from x and the filters, dgrad dx from dy and the filters,
  /// wgrad the filters' gradient from x and dy. Data and math types follow PyTorch's
  /// ConvolutionDescriptor (aten/src/ATen/cudnn/Descriptors.h): fp32 NCHW with FMA math (no
  /// tensor cores), tf32 NCHW with default math (TF32 tensor cores allowed), fp16 and bf16 NHWC
  /// (channels-last) with tensor-op math; compute type float throughout. The Find workspace is
  /// the largest the heuristic (Get*_v7) lists, up to half the free memory. Inputs are finite
  /// random data. Not measured, with the reason: FP8 (no cuDNN convolution), a malformed shape,
  /// no algorithm, too little memory.
  Measurement measure(const sim::OpSignature& s, BenchTimer& timer);

  /// cudnnGetVersion(): the cuDNN library loaded (e.g. 91900 for 9.19.0).
  static std::size_t version();

 private:
  cudnnContext* handle_ = nullptr;
};

}  // namespace foresight::prof
