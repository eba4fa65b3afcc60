#pragma once
/// A CNN whose BatchNorm kernels take in the ReLU and the residual add that follow them
/// (plan.batchnorm_fusion), as NVIDIA's MXNet ResNet-50 for MLPerf Training runs it
/// (mlcommons/training_results_v0.7, v1.0 and v3.1, NVIDIA/benchmarks/resnet/implementations/mxnet:
/// symbols/resnet-v1b-fl.py, resnet-v1b-stats-fl.py and resnet-v1b-mainloop-fl.py with
/// --fuse-bn-relu 1 --fuse-bn-add-relu 1). See docs/models.md, "Fused BatchNorm".
///
/// - bn_relu (resnet-v1b-fl: MXNet's NHWC BatchNorm with act_type relu, and BatchNormAddRelu at
///   the end of a residual block): a BatchNorm followed by a ReLU is one kernel each way, forward
///   reading x and writing y, backward reading dy and x and writing dx (the ReLU's mask is
///   recomputed from x). A BatchNorm followed by the block's residual add and ReLU is one kernel
///   each way too: forward reads x and the addend and writes y and a 1-bit ReLU mask, backward
///   reads dy, x and the mask and writes dx and the addend's gradient. The ReLU and add kernels
///   go; so does the add's backward, the sum of the two branches' gradients where they fork
///   (MXNet's executor accumulates the second branch's gradient into the first's buffer: the
///   convolution's input gradient adds to it).
/// - conv_stats (resnet-v1b-stats-fl: NormConvolution): each convolution also computes the
///   per-channel sum and sum of squares of its output, so a BatchNorm's forward is only the
///   scale-bias-ReLU pass over it (ScaleBiasAddRelu): an elementwise kernel at the vectorized
///   rate rather than a reduction at BatchNorm's. A downsampling block applies both of its last
///   BatchNorms, the add and the ReLU in one pass (dual scale-bias, "dbar"): its shortcut
///   BatchNorm's forward kernel goes too. Backward is as bn_relu's. The stem's BatchNorm, after
///   a plain convolution, stays bn_relu's kernel.
/// - conv_mainloop (resnet-v1b-mainloop-fl, MLPerf v3.1 on one DGX H100): as conv_stats, but a
///   BatchNorm and ReLU inside a block are applied by the next convolution as it loads its input
///   (NormConvolution with the previous one's sums): their forward pass goes. Only the blocks'
///   last BatchNorms, with the add and ReLU, keep a forward kernel.
///
/// Layer FLOPs (what MFU counts) and saved activations are unchanged; each fused kernel counts
/// the FLOPs of the kernels it replaces.

#include <cstdint>

#include "models/model.hpp"

namespace foresight::strategy {

enum class BatchNormFusion : std::uint8_t { none, bn_relu, conv_stats, conv_mainloop };

/// `model` with `fusion` applied; `activation_bytes` is the size of an activation element (the
/// ReLU mask is one bit per element). Layers stay as they are; kernels move.
Model with_batchnorm_fusion(Model model, BatchNormFusion fusion, int activation_bytes);

/// Whether `model` has a BatchNorm followed by a ReLU or a residual add (what fusion changes).
bool has_fusable_batchnorm(const Model& model);

}  // namespace foresight::strategy
