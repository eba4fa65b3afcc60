#include "profiler/conv_bench.hpp"

#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "profiler/detail/cuda_check.hpp"
#include "profiler/detail/owned.hpp"
#include "profiler/device_buffer.hpp"

namespace foresight::prof {
namespace {

void check(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) throw sim::Error(fmt::format("{}: {}", what, cudnnGetErrorString(s)));
}

struct ConvTypes {
  cudnnDataType_t data = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  int bytes = 4;
};

std::optional<ConvTypes> types_of(sim::DType d) {
  switch (d) {
    case sim::DType::fp32: return ConvTypes{};
    case sim::DType::tf32: return ConvTypes{CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_DEFAULT_MATH, 4};
    case sim::DType::fp16: return ConvTypes{CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH, 2};
    case sim::DType::bf16: return ConvTypes{CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH, 2};
    case sim::DType::fp8: return std::nullopt;
  }
  return std::nullopt;
}

using TensorDesc = detail::Owned<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDesc = detail::Owned<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc = detail::Owned<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;

TensorDesc tensor(const ConvTypes& t, int n, int c, int h, int w) {
  cudnnTensorDescriptor_t d = nullptr;
  check(cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor");
  TensorDesc owned(d);
  check(cudnnSetTensor4dDescriptor(d, t.format, t.data, n, c, h, w), "cudnnSetTensor4dDescriptor");
  return owned;
}

/// The largest workspace among the algorithms the heuristic lists as runnable.
template <typename Perf>
std::size_t largest_workspace(const Perf* perf, int count) {
  std::size_t most = 0;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS) most = std::max(most, perf[i].memory);
  }
  return most;
}
/// The fastest algorithm that ran, or nullptr.
template <typename Perf>
const Perf* fastest(const Perf* perf, int count) {
  for (int i = 0; i < count; ++i) {  // cuDNN sorts Find's results by time
    if (perf[i].status == CUDNN_STATUS_SUCCESS) return &perf[i];
  }
  return nullptr;
}

/// Half the device's free memory: what the Find workspace may take.
std::size_t workspace_cap() {
  std::size_t free = 0, total = 0;
  detail::check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free / 2;
}

std::optional<DeviceBuffer> workspace_for(std::size_t wanted) {
  return DeviceBuffer::allocate(std::min(wanted, workspace_cap()));
}

}  // namespace

ConvBench::ConvBench() { check(cudnnCreate(&handle_), "cudnnCreate"); }

ConvBench::~ConvBench() { cudnnDestroy(handle_); }

std::size_t ConvBench::version() { return cudnnGetVersion(); }

Measurement ConvBench::measure(const sim::OpSignature& sig, BenchTimer& timer) {
  const std::optional<ConvTypes> t = types_of(sig.dtype);
  if (!t) return Measurement::skipped("FP8 convolutions are not in cuDNN's convolution API");
  if (sig.shape.size() != 10) return Measurement::skipped("convolution shape without 10 dimensions");
  int d[10];
  for (int i = 0; i < 10; ++i) d[i] = static_cast<int>(sig.shape[static_cast<std::size_t>(i)]);
  const int n = d[0], c = d[1], h = d[2], w = d[3], k = d[4], r = d[5], s = d[6], stride = d[7], pad = d[8],
            groups = d[9];
  if (std::any_of(d, d + 10, [](int v) { return v < 0; }) || n == 0 || c == 0 || k == 0 || r == 0 || s == 0 ||
      stride == 0 || groups == 0 || c % groups != 0 || k % groups != 0) {
    return Measurement::skipped("malformed convolution shape");
  }

  const TensorDesc x = tensor(*t, n, c, h, w);
  cudnnFilterDescriptor_t raw_filter = nullptr;
  check(cudnnCreateFilterDescriptor(&raw_filter), "cudnnCreateFilterDescriptor");
  const FilterDesc filter(raw_filter);
  check(cudnnSetFilter4dDescriptor(raw_filter, t->data, t->format, k, c / groups, r, s), "cudnnSetFilter4dDescriptor");
  cudnnConvolutionDescriptor_t raw_conv = nullptr;
  check(cudnnCreateConvolutionDescriptor(&raw_conv), "cudnnCreateConvolutionDescriptor");
  const ConvDesc conv(raw_conv);
  check(cudnnSetConvolution2dDescriptor(raw_conv, pad, pad, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor");
  check(cudnnSetConvolutionGroupCount(raw_conv, groups), "cudnnSetConvolutionGroupCount");
  check(cudnnSetConvolutionMathType(raw_conv, t->math), "cudnnSetConvolutionMathType");
  int yn = 0, yk = 0, yh = 0, yw = 0;
  check(cudnnGetConvolution2dForwardOutputDim(raw_conv, x.get(), raw_filter, &yn, &yk, &yh, &yw),
        "cudnnGetConvolution2dForwardOutputDim");
  if (yh <= 0 || yw <= 0) return Measurement::skipped("convolution with an empty output");
  const TensorDesc y = tensor(*t, yn, yk, yh, yw);

  const auto bytes_of = [&](long long elements) { return static_cast<std::size_t>(elements) * t->bytes; };
  std::optional<DeviceBuffer> dx = DeviceBuffer::allocate(bytes_of(1LL * n * c * h * w));
  std::optional<DeviceBuffer> dw = DeviceBuffer::allocate(bytes_of(1LL * k * (c / groups) * r * s));
  std::optional<DeviceBuffer> dy = DeviceBuffer::allocate(bytes_of(1LL * yn * yk * yh * yw));
  if (!dx || !dw || !dy) return Measurement::skipped("out of GPU memory");
  dx->fill_finite(t->bytes, 1);
  dw->fill_finite(t->bytes, 2);
  dy->fill_finite(t->bytes, 3);
  const float alpha = 1.0f, beta = 0.0f;
  int found = 0;

  switch (sig.type) {
    case sim::OpType::conv_fprop: {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      check(cudnnGetConvolutionForwardAlgorithm_v7(handle_, x.get(), raw_filter, raw_conv, y.get(),
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf),
            "cudnnGetConvolutionForwardAlgorithm_v7");
      std::optional<DeviceBuffer> ws = workspace_for(largest_workspace(perf, found));
      if (!ws) return Measurement::skipped("out of GPU memory (workspace)");
      check(cudnnFindConvolutionForwardAlgorithmEx(handle_, x.get(), dx->get(), raw_filter, dw->get(), raw_conv,
                                                   y.get(), dy->get(), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf,
                                                   ws->get(), ws->bytes()),
            "cudnnFindConvolutionForwardAlgorithmEx");
      const cudnnConvolutionFwdAlgoPerf_t* best = fastest(perf, found);
      if (best == nullptr) return Measurement::skipped("no cuDNN algorithm for this convolution");
      check(cudnnSetConvolutionMathType(raw_conv, best->mathType), "cudnnSetConvolutionMathType");
      return timer.time([&] {
        check(cudnnConvolutionForward(handle_, &alpha, x.get(), dx->get(), raw_filter, dw->get(), raw_conv, best->algo,
                                      ws->get(), ws->bytes(), &beta, y.get(), dy->get()),
              "cudnnConvolutionForward");
      });
    }
    case sim::OpType::conv_dgrad: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      check(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, raw_filter, y.get(), raw_conv, x.get(),
                                                        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, perf),
            "cudnnGetConvolutionBackwardDataAlgorithm_v7");
      std::optional<DeviceBuffer> ws = workspace_for(largest_workspace(perf, found));
      if (!ws) return Measurement::skipped("out of GPU memory (workspace)");
      check(cudnnFindConvolutionBackwardDataAlgorithmEx(handle_, raw_filter, dw->get(), y.get(), dy->get(), raw_conv,
                                                        x.get(), dx->get(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                        &found, perf, ws->get(), ws->bytes()),
            "cudnnFindConvolutionBackwardDataAlgorithmEx");
      const cudnnConvolutionBwdDataAlgoPerf_t* best = fastest(perf, found);
      if (best == nullptr) return Measurement::skipped("no cuDNN algorithm for this convolution");
      check(cudnnSetConvolutionMathType(raw_conv, best->mathType), "cudnnSetConvolutionMathType");
      return timer.time([&] {
        check(cudnnConvolutionBackwardData(handle_, &alpha, raw_filter, dw->get(), y.get(), dy->get(), raw_conv,
                                           best->algo, ws->get(), ws->bytes(), &beta, x.get(), dx->get()),
              "cudnnConvolutionBackwardData");
      });
    }
    case sim::OpType::conv_wgrad: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle_, x.get(), y.get(), raw_conv, raw_filter,
                                                          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found, perf),
            "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
      std::optional<DeviceBuffer> ws = workspace_for(largest_workspace(perf, found));
      if (!ws) return Measurement::skipped("out of GPU memory (workspace)");
      check(cudnnFindConvolutionBackwardFilterAlgorithmEx(handle_, x.get(), dx->get(), y.get(), dy->get(), raw_conv,
                                                          raw_filter, dw->get(), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                          &found, perf, ws->get(), ws->bytes()),
            "cudnnFindConvolutionBackwardFilterAlgorithmEx");
      const cudnnConvolutionBwdFilterAlgoPerf_t* best = fastest(perf, found);
      if (best == nullptr) return Measurement::skipped("no cuDNN algorithm for this convolution");
      check(cudnnSetConvolutionMathType(raw_conv, best->mathType), "cudnnSetConvolutionMathType");
      return timer.time([&] {
        check(cudnnConvolutionBackwardFilter(handle_, &alpha, x.get(), dx->get(), y.get(), dy->get(), raw_conv,
                                             best->algo, ws->get(), ws->bytes(), &beta, raw_filter, dw->get()),
              "cudnnConvolutionBackwardFilter");
      });
    }
    default:
      return Measurement::skipped("not a convolution");
  }
}

}  // namespace foresight::prof
