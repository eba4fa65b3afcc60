#pragma once
/// The parallel plan: how a model is trained on a cluster. Every default is stated here with its
/// source; `foresight simulate --json` prints the effective plan.

#include <cstdint>
#include <string>

#include "sim/network_model.hpp"
#include "sim/units.hpp"

namespace foresight::strategy {

/// Numeric formats. fp32 computes convolutions (and, when enabled, matmuls) in TF32 on Ampere
/// and later, as PyTorch does by default; amp_* is torch.autocast: fp32 master weights and
/// gradients, half-precision math and activations; fp16/bf16 are pure half precision.
enum class Precision : std::uint8_t { fp32, amp_fp16, amp_bf16, fp16, bf16 };
std::string_view to_string(Precision p);

/// Data-parallel frameworks: PyTorch DDP (gradient buckets) and Horovod (tensor fusion).
enum class Framework : std::uint8_t { ddp, horovod };
std::string_view to_string(Framework f);

enum class Optimizer : std::uint8_t { sgd, adam };
std::string_view to_string(Optimizer o);

struct Plan {
  int dp = 1;
  int tp = 1;  ///< tensor parallelism: 1 until the tensor-parallel strategy lands
  int pp = 1;  ///< pipeline parallelism: 1 until the pipeline strategy lands
  int ep = 1;  ///< expert parallelism: 1 until the MoE strategy lands
  int micro_batch = 1;  ///< samples per rank per forward/backward
  int grad_accum = 1;   ///< forward/backward passes per optimizer step
  int global_batch = 0; ///< samples per optimizer step = dp x micro_batch x grad_accum

  Framework framework = Framework::ddp;
  Precision precision = Precision::fp32;
  /// torch.backends.cudnn.allow_tf32 defaults to True; torch.backends.cuda.matmul.allow_tf32 to
  /// False since PyTorch 1.12 (PyTorch docs, "TensorFloat-32 (TF32) on Ampere devices").
  bool tf32_conv = true;
  bool tf32_matmul = false;
  Optimizer optimizer = Optimizer::sgd;

  /// DDP: bucket_cap_mb defaults to 25 MiB, the first bucket to 1 MiB (reducer.hpp
  /// kDefaultBucketBytesCap, kDefaultFirstBucketBytes).
  sim::Bytes bucket_cap = sim::Bytes(25LL << 20);
  sim::Bytes first_bucket = sim::Bytes(1LL << 20);
  /// Horovod since v0.21: fusion threshold 128 MiB, cycle time 1 ms (CHANGELOG, operations.cc).
  sim::Bytes fusion_threshold = sim::Bytes(128LL << 20);
  sim::Time cycle_time = sim::Time::from_ps(1'000'000'000);

  /// Samples per second one process's input pipeline (DataLoader workers) delivers; 0 means it
  /// always keeps up. No default can be measured for every dataset and machine: set it from a
  /// calibration (the ThetaGPU example fits it).
  double input_rate = 0.0;
  /// Host time per training step outside the kernels' launches (loop body, zero_grad, logging):
  /// 1 ms, an assumption.
  sim::Time step_overhead = sim::Time::from_ps(1'000'000'000);
  /// Host cost of launching one kernel: 8 us in the forward pass (an eager CUDA op's host submit
  /// on A100, Torch-FL PR #27); 5 us in the backward pass, which autograd drives from C++ (a
  /// CUDA launch is 4-6 us); 50 us for the whole optimizer step (foreach kernels), an assumption.
  sim::Time dispatch_forward = sim::Time::from_ps(8'000'000);
  sim::Time dispatch_backward = sim::Time::from_ps(5'000'000);
  sim::Time dispatch_optimizer = sim::Time::from_ps(50'000'000);
  /// The host waits for the GPU at the end of every step (loss.item() in the training loop).
  bool sync_each_step = true;

  /// See sim::ExecutorOptions::comm_compute_slowdown.
  double comm_compute_slowdown = 0.0;
  sim::NetworkKind network = sim::NetworkKind::flow;
  /// Training steps simulated; the iteration time is the mean of all but the first.
  int steps = 3;
};

/// Bytes per element of activations, of parameters as stored (master weights), and of gradients.
int activation_bytes(Precision p);
int parameter_bytes(Precision p);
int gradient_bytes(Precision p);

}  // namespace foresight::strategy
