#pragma once
/// Builders of Foresight's models. One factory per layer kind computes, from the layer's shape
/// alone, everything strategies need per sample: parameters, forward and backward FLOPs, the
/// activation elements kept for backward, the output elements and the kernels (OpTemplates) of
/// both passes. A layer's FLOPs are the sum of its kernels' FLOPs, by construction.
///
/// Conventions (model_builder.cpp cites each constant):
/// - GEMMs and convolutions count 2 FLOPs per multiply-add; every backward GEMM or convolution
///   kernel (input gradient, weight gradient) has its forward's FLOPs.
/// - Memory-bound kernels count FLOPs per element as DeepSpeed's flops profiler does; their
///   backward kernels count twice their forward's (the 2x rule of Korthikanti et al. 2022, App. A).
/// - Saved activations follow Korthikanti et al. 2022 (K22) §4.1 for transformers (a linear layer
///   saves its input, a norm its input, GELU its input, softmax its output, dropout its mask,
///   a residual add nothing) and, for CNNs, convolution, batchnorm and pooling save their input,
///   ReLU its output. Saved elements are counted as elements whatever their dtype (a dropout mask
///   is one element per value; the strategy converts to bytes).
/// Shapes are per sample: the batch dimension of every kernel is 1, at its batch_axis.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/model.hpp"

namespace foresight::strategy {

/// Per-sample dimensions of an activation, without the batch dimension: {c, h, w} for images,
/// {seq, hidden} for token sequences.
using Dims = std::vector<std::int64_t>;

/// Elements of `dims` (1 for none).
std::int64_t elements(const Dims& dims);

/// An image activation of one sample: channels x height x width.
struct ImageShape {
  std::int64_t c = 0;
  std::int64_t h = 0;
  std::int64_t w = 0;
  /// Elements per sample.
  std::int64_t elems() const { return c * h * w; }
  /// {c, h, w}.
  Dims dims() const { return {c, h, w}; }
};

/// A 2-D convolution (square kernel), PyTorch's nn.Conv2d arguments.
struct ConvSpec {
  std::int64_t out = 0;  ///< output channels
  int kernel = 1;        ///< kernel height = width
  int stride = 1;
  int pad = 0;     ///< zero padding on each side
  int groups = 1;  ///< = channels for depthwise convolutions
  bool bias = false;
};

/// The output of a convolution or pooling window over `in`: floor((h + 2 pad - k) / stride) + 1.
/// ModelError when the window does not fit or the channels are not divisible by the groups.
ImageShape conv_output(ImageShape in, const ConvSpec& spec);

/// Pointwise activation functions.
enum class Activation : std::uint8_t { relu, relu6, gelu, silu, tanh };
/// Token normalizations: LayerNorm (Ba et al. 2016) or RMSNorm (Zhang and Sennrich 2019).
enum class Norm : std::uint8_t { layernorm, rmsnorm };
/// Pooling kinds.
enum class Pool : std::uint8_t { max, avg };

// ---- Layer factories. Each returns a complete layer with block -1 (ModelBuilder stamps it). ----

/// cuDNN convolution: conv_fprop, then conv_dgrad (only when `input_grad`: the first layer's
/// input needs no gradient) and conv_wgrad, all with shape {1, c, h, w, k, r, s, stride, pad,
/// groups}, batch axis 0, 2 (c/groups) r s k h_out w_out FLOPs each. Saves its input.
Layer conv_layer(std::string name, ImageShape in, const ConvSpec& spec, bool input_grad = true);

/// Training-mode batch normalization over `in`: 2c parameters (scale, shift). Saves its input.
Layer batchnorm_layer(std::string name, ImageShape in);

/// Pointwise activation over `dims`. ReLU, ReLU6 and tanh save their output, GELU and SiLU their
/// input (what PyTorch's autograd keeps).
Layer activation_layer(std::string name, Activation act, const Dims& dims);

/// SwiGLU (Shazeer 2020): silu(gate) * up over a {rows, 2 ffn} input whose halves are the gate
/// and up projections; output {rows, ffn}. Saves its input (both halves).
Layer swiglu_layer(std::string name, std::int64_t rows, std::int64_t ffn);

/// Max or average pooling with a square `kernel` window. Saves its input.
Layer pool_layer(std::string name, Pool kind, ImageShape in, int kernel, int stride, int pad);

/// Elementwise sum of two activations of `dims` (a residual connection). Saves nothing; its
/// backward kernel accumulates the two branches' gradients where they fork.
Layer add_layer(std::string name, const Dims& dims);

/// Dropout over `dims`. Saves its mask (one element per value).
Layer dropout_layer(std::string name, const Dims& dims);

/// cuBLAS linear layer y = x W^T (+ b) over `rows` rows per sample: forward gemm {rows, out, in,
/// 1} (batch axis 0), input gradient {rows, in, out, 1} (axis 0), weight gradient {out, in, rows,
/// 1} (axis 2, kernel name ending in "wgrad"); 2 rows in out FLOPs each. `tied`: the weight is
/// another layer's (an LM head tied to the embedding): no parameters of its own, same kernels.
/// Saves its input.
Layer linear_layer(std::string name, std::int64_t rows, std::int64_t in, std::int64_t out,
                   bool bias, bool tied = false);

/// LayerNorm (scale and shift: 2 hidden parameters) or RMSNorm (scale: hidden) over
/// {rows, hidden}. Saves its input.
Layer norm_layer(std::string name, Norm kind, std::int64_t rows, std::int64_t hidden);

/// Token embedding: one gather of `seq` rows of `hidden` from each table (`table_rows`: word,
/// then learned positions and token types when present), summed; backward scatter-adds into
/// each table's dense gradient. Saves the indices (seq per table).
Layer embedding_layer(std::string name, std::int64_t seq, std::int64_t hidden,
                      const std::vector<std::int64_t>& table_rows);

/// The attention core between the QKV and output projections, unfused (what Megatron's FLOP
/// formulas count), for one sequence.
struct AttentionShape {
  std::int64_t seq = 0;
  std::int64_t heads = 0;     ///< query heads
  std::int64_t kv_heads = 0;  ///< key/value heads (= heads without grouped-query attention)
  std::int64_t head_dim = 0;
  bool rope = false;     ///< rotary position embedding applied to queries and keys
  bool dropout = false;  ///< dropout on the attention probabilities
  bool alibi = false;    ///< ALiBi: a per-head linear bias added to the scores (Press et al. 2022)
  std::int64_t window = 0;  ///< sliding window (Layer::attention_window); 0: none
  bool qk_norm = false;     ///< RMSNorm over each head's query and key before RoPE (Qwen3)
  /// Attention sinks (GPT-OSS): a learned logit per head in every softmax's denominator, a
  /// parameter per head. Their cost, one more term per softmax row, is left out (1/s of it).
  bool sinks = false;
};

/// With a sliding window w < s the kernels still compute every score (masked), while the layer's
/// model FLOPs count w keys per query.
/// Forward: [RoPE,] scores Q K^T (gemm {s, s, d, heads}), [ALiBi bias add,] scaled masked softmax, [dropout,]
/// context P V (gemm {s, d, s, heads}); the GEMMs have batch axis 3 (count = heads x micro-batch).
/// Backward: the two input-gradient GEMMs of each product, [dropout and] softmax backward
/// [, RoPE backward]. Saves Q, K, V, the softmax output [, dropout mask and dropout output].
/// With qk_norm, one fused RMSNorm kernel over the queries and keys comes first (read and write)
/// and its backward last (read the input and the gradient, write the gradient); it saves its
/// input.
Layer attention_layer(std::string name, const AttentionShape& shape);

/// The model with every attention core fused FlashAttention-style (Dao 2023): one forward kernel
/// (OpType::attention, shape {heads, s, s, head_dim, causal}, batch axis 0) of 4 s^2 d h FLOPs,
/// halved when causal, and one backward kernel of 2.5x that (it recomputes the scores). A core
/// with a sliding window w < s (causal only) adds w as shape[6] and counts 4 d h FLOPs per
/// attended pair, w s - w (w - 1) / 2 pairs (FlashAttention-2's window_size skips the blocks
/// outside it); RoPE
/// kernels stay. The s x s scores are no longer saved, only the softmax statistics (one fp32 per
/// query row and head). Layer FLOPs stay the unfused model FLOPs that MFU counts.
/// `kernel` (kAttention* of models/compute_model.hpp) names the fused kernel: shape[5] of both.
Model with_fused_attention(Model model, std::int64_t kernel = 0);

/// The model under Transformer Engine's FP8 recipe (TE's Linear in fp8_autocast, delayed
/// scaling; Micikevicius et al. 2022): every linear layer inside a transformer block runs its
/// three GEMMs (forward, input and weight gradients) in FP8. Before its forward GEMM, one kernel
/// casts the input to FP8 with its transpose for the weight gradient (read 2 bytes, write 1 + 1
/// per element, taking the amax), and one casts the weight likewise; before the gradient GEMMs
/// one kernel casts the output gradient with its transpose. The embedding, the LM head, attention
/// products, norms and everything else keep the precision's dtype, as Megatron-Core with
/// --fp8-format does. Routed experts run their GEMMs in FP8 too (Transformer Engine's
/// GroupedLinear, Megatron-Core's TEGroupedMLP), each expert's with the same casts at its tokens
/// and one weight cast per expert and micro-batch. Layer FLOPs (what MFU counts) are unchanged.
Model with_fp8(Model model);
/// Whether `kernel` is one of with_fp8's weight casts (a linear layer's or an expert's), which
/// Transformer Engine runs in a step's first micro-batch only and reuses after
/// (is_first_microbatch).
bool is_fp8_weight_cast(std::string_view kernel);
/// with_fp8 under Transformer Engine's current scaling (Float8CurrentScaling, TE 2.x; what
/// Megatron-Bridge's "fp8_cs" runs): each cast is preceded by a pass that reads the tensor for its
/// amax ("fp8_amax_<tensor>", 2 bytes an element) and a kernel that turns it into the scale
/// ("fp8_scale_<tensor>", a launch), where delayed scaling takes the amax inside the cast
/// (models/fp8_scaling.cpp). The amax all-reduce over the tensor-parallel group that sequence
/// parallelism adds (column-parallel inputs, row-parallel output gradients: one value each) is
/// not modelled.
Model with_fp8_current_scaling(Model model);
/// The tensor an FP8 cast, amax pass or scale kernel is for ("weight", "expert_up_grad", ...),
/// or empty for another kernel.
std::string_view fp8_cast_of(std::string_view kernel);

/// Softmax cross-entropy over {rows, classes} logits (the loss: the model's last layer). Saves
/// the log-probabilities.
Layer loss_layer(std::string name, std::int64_t rows, std::int64_t classes);

/// Appends layers in forward order, stamping each with the current block, and checks the
/// finished model.
class ModelBuilder {
 public:
  explicit ModelBuilder(std::string name);

  /// Layers added from now on belong to block `block` (-1: stem, head, embedding, loss).
  void set_block(int block) { block_ = block; }
  /// Appends `layer` stamped with the current block.
  void add(Layer layer);

  /// The model. ModelError when it has no layers, a layer name repeats, a layer has no forward
  /// kernel or the last layer is not the loss. `input_elems`: per sample (3 h w for images,
  /// seq_len for transformers).
  Model finish(double input_elems, int seq_len = 0,
               std::optional<TransformerShape> transformer = std::nullopt);

 private:
  Model model_;
  int block_ = -1;
};

// ---- Model families (zoo_cnn.cpp, zoo_transformer.cpp) ----

/// He et al. 2016 ResNets as torchvision builds them (ImageNet: 7x7/2 stem, 3x3/2 max-pool) or
/// as the common CIFAR variant (kuangliu/pytorch-cifar: 3x3/1 stem, no max-pool).
struct ResNetSpec {
  std::string name;
  bool bottleneck = false;      ///< Bottleneck (expansion 4) instead of BasicBlock
  std::array<int, 4> blocks{};  ///< blocks per stage
  bool cifar = false;           ///< 32x32 input and CIFAR stem; else 224x224
  int classes = 1000;
};
Model build_resnet(const ResNetSpec& spec);

/// VGG-19 (Simonyan and Zisserman 2015, configuration E) as torchvision's vgg19 (no batchnorm)
/// on 3x224x224, with `classes` outputs.
Model build_vgg19(const std::string& name, int classes);

/// MobileNetV2 (Sandler et al. 2018, Table 2) width 1.0 on 3x224x224 as torchvision's
/// mobilenet_v2, with `classes` outputs.
Model build_mobilenet_v2(const std::string& name, int classes);

/// A transformer as the zoo and the Hugging Face import describe it.
struct TransformerSpec {
  std::string name;
  TransformerShape shape;  ///< layers, hidden, heads, kv_heads, ffn, vocab, seq_len, swiglu, causal
  int head_dim = 0;        ///< 0: hidden / heads
  int positions = 0;       ///< rows of a learned absolute position table; 0: see rope and alibi
  bool rope = true;        ///< without a table: rotary embeddings (RoPE); false: none (NoPE)
  bool alibi = false;      ///< without a table: ALiBi biases on the scores instead of RoPE (MPT)
  int token_types = 0;     ///< rows of a token-type (segment) table (BERT); 0: none
  Norm norm = Norm::layernorm;
  bool pre_norm = true;           ///< pre-LN with a final norm (GPT, Llama); false: post-LN with an
                                  ///< embedding norm (BERT)
  bool embedding_norm = false;    ///< a pre-LN model's norm after the embedding (BLOOM's
                                  ///< word_embeddings_layernorm)
  bool qkv_bias = true;           ///< bias on the QKV projection
  bool proj_bias = true;          ///< bias on the attention output projection
  bool mlp_bias = true;           ///< bias on the MLP projections
  bool tied_embeddings = true;    ///< the LM head reuses the word embedding
  bool hidden_dropout = true;     ///< dropout after the embedding and on each residual branch
  bool attention_dropout = true;  ///< dropout on the attention probabilities
  bool pooler = false;            ///< BERT's pooler (dense + tanh on the first token)
  /// Per block, its attention's sliding window in tokens (Layer::attention_window); empty: none.
  std::vector<int> windows;
  bool qk_norm = false;  ///< RMSNorm of each head's query and key (Qwen3's q_norm and k_norm)
  bool attention_sinks = false;  ///< a learned sink logit per head (GPT-OSS; AttentionShape::sinks)
};

/// Embedding, `layers` blocks (pre- or post-norm; attention then MLP, GELU or SwiGLU), [final
/// norm,] [pooler,] LM head over all seq_len positions and the cross-entropy loss. ModelError
/// naming the model when a size is not positive, the heads do not divide, or seq_len exceeds a
/// learned position table.
Model build_transformer(const TransformerSpec& spec);

/// The router: a linear h -> E projection per token (with a bias: E more parameters), softmax
/// and top-k selection.
Layer router_layer(std::string name, std::int64_t seq, std::int64_t hidden, int experts, int top_k, bool bias = false);

/// `experts` routed FFNs (gated: h -> 2f, SwiGLU, f -> h; else h -> f, GELU, f -> h) taking
/// `top_k` of each sample's `seq` tokens, plus the permutation into expert order and back
/// (gather/scatter of h per assignment). Kernels are per token; the layer's totals are for
/// `seq` x `top_k` assignments. With `bias`, each expert's projections have biases (GPT-OSS:
/// up + h more parameters per expert; added in the GEMMs' epilogues, no kernel of their own).
Layer experts_layer(std::string name, std::int64_t seq, std::int64_t hidden, std::int64_t ffn, int experts, int top_k,
                    bool gated, bool bias = false);

}  // namespace foresight::strategy
