#pragma once
/// A model as Foresight sees it: an ordered list of layers, each with its parameters, FLOPs,
/// activation sizes and the kernels it launches, all per sample and computed from layer shapes
/// (never from hard-coded totals). A sample is one image for CNNs and one sequence of
/// `seq_len` tokens for transformers. Strategies instantiate the kernels for a micro-batch and a
/// precision; the compute model costs them.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exec/op_signature.hpp"

namespace foresight::strategy {

/// Which of the two dtypes of a precision policy a kernel computes in.
enum class MathKind : std::uint8_t {
  matmul,     ///< GEMMs (linear layers, attention products): tensor cores
  matmul_fp8, ///< GEMMs in FP8 whatever the precision (Transformer Engine: with_fp8)
  conv,       ///< convolutions (cuDNN): tensor cores
  pointwise,  ///< memory-bound kernels: run in the activation dtype
};

/// One kernel of a layer, for one sample. For a micro-batch of b samples the strategy
/// multiplies shape[batch_axis] by b (when `batched`), and flops and act_elems by b.
struct OpTemplate {
  sim::OpType type = sim::OpType::memory;
  MathKind math = MathKind::pointwise;
  std::string kernel;                ///< "conv2d", "batchnorm_fwd", "linear_fwd", "softmax"...
  std::vector<std::int64_t> shape;   ///< per sample; see sim::OpType for the layout
  std::uint8_t batch_axis = 0;       ///< see sim::OpSignature::batch_axis
  bool batched = true;               ///< the kernel's size scales with the micro-batch
  double flops = 0.0;                ///< per sample
  double act_elems = 0.0;            ///< activation elements read + written, per sample
  double param_elems = 0.0;          ///< parameter elements read (+ written), whatever the batch
  /// Bytes read + written per sample (of the whole kernel where not `batched`) whatever the
  /// precision, for kernels whose dtypes are fixed (eager PyTorch under autocast: an fp32
  /// residual stream beside bf16 GEMM outputs). 0: act_elems and param_elems in the precision's
  /// dtypes decide.
  double bytes = 0.0;
  sim::MemoryPath path = sim::MemoryPath::vectorized;  ///< memory kernels: see sim::MemoryPath
};

/// How Megatron-style tensor parallelism splits a layer over the t ranks of a TP group
/// (Shoeybi et al. 2019, §3; Korthikanti et al. 2022, §4.2 for sequence parallelism):
enum class TpRole : std::uint8_t {
  replicated,  ///< norms, dropout, residual adds, CNN layers: whole on every rank (SP: 1/t of the sequence)
  column,      ///< linear split by output features (QKV, MLP up/gate, vocabulary-parallel LM head):
               ///< input replicated (SP: gathered from sequence shards), output sharded
  row,         ///< linear split by input features (attention and MLP output projections): input
               ///< sharded, output partial sums reduced across the group
  sharded,     ///< works on sharded features only: attention heads, the MLP activation, the
               ///< vocabulary-parallel loss
  vocab,       ///< vocabulary-parallel embedding: a 1/t slice of the table, outputs reduced
  expert,      ///< routed experts with expert TP = TP (Megatron's default): each expert's FFN split
               ///< as an MLP is (column then row), inputs gathered and outputs reduced around it
};
std::string_view to_string(TpRole r);

/// The first kernel of `ops` named `kernel`, or null.
const OpTemplate* find_op(const std::vector<OpTemplate>& ops, std::string_view kernel);

struct Layer {
  std::string name;          ///< "layer1.0.conv1", "h.11.attn.qkv"
  std::string kind;          ///< conv, batchnorm, relu, maxpool, avgpool, linear, add, embedding,
                             ///< layernorm, rmsnorm, attention, activation, dropout, loss, ...
  std::int64_t params = 0;   ///< trainable parameters
  /// Parameters of another layer's weight this one uses (an LM head tied to the word embedding,
  /// counted there). A pipeline rank running this layer without that one keeps a copy, with its
  /// gradients and optimizer states (Megatron's word_embeddings on the last stage, DeepSpeed's
  /// TiedLayerSpec).
  std::int64_t tied_params = 0;
  double fwd_flops = 0.0;    ///< per sample
  double bwd_flops = 0.0;    ///< per sample: input gradient + weight gradient
  double saved_elems = 0.0;  ///< activation elements kept for the backward pass, per sample
  double saved_mask_elems = 0.0;  ///< 1-byte dropout-mask elements kept for backward, per sample
  /// Of saved_elems and saved_mask_elems, what a checkpointed attention core (selective
  /// recompute's core_attn) does not keep: unfused, the attention scores (s x s per head, K22
  /// §5), which a fused kernel never keeps either; fused, the kernel's log-sum-exp.
  double saved_score_elems = 0.0;
  double saved_score_mask_elems = 0.0;
  TpRole tp = TpRole::replicated;
  double output_elems = 0.0; ///< elements of the layer's output, per sample
  std::vector<OpTemplate> fwd;
  std::vector<OpTemplate> bwd;
  /// Routed experts (a Mixture-of-Experts layer, kind "experts"): its kernels are one expert's
  /// FFN for one token (batch axis = tokens), which the strategy runs per expert at the tokens
  /// routed to it; params, FLOPs and saved elements count all `experts` at `top_k` per token.
  int experts = 0;
  int top_k = 0;
  /// Sliding-window attention (an attention core): each query attends to the last
  /// `attention_window` positions, itself included (Mistral's sliding_window); 0: all before it.
  /// Unfused cores compute every score and mask the rest, so only the fused kernel
  /// (with_fused_attention) skips what lies outside the window.
  std::int64_t attention_window = 0;
  /// The repeated unit the layer belongs to (a ResNet basic/bottleneck block, a transformer
  /// layer), -1 outside any: the boundaries pipeline partitioning may cut at.
  int block = -1;
  /// A linear layer that fuses several projections an eager PyTorch model runs as separate
  /// matrix multiplies: their output widths in the order the model calls them (query, key,
  /// value; gate, up). Empty: one. Per-op selective recompute counts matrix multiplies.
  std::vector<std::int64_t> matmul_widths;
  /// Bytes kept for the backward pass per sample whatever the precision, where eager kernels fix
  /// the dtypes (with_eager_kernels); unset: saved_elems in the activation dtype plus the 1-byte
  /// masks.
  std::optional<double> saved_bytes;
  /// Bytes of the output as the next layer holds it, per sample (eager under autocast: an fp32
  /// residual stream, fp32 logits for the loss); unset: output_elems in the activation dtype.
  std::optional<double> output_bytes;
};

/// Whether `l` is a LayerNorm or an RMSNorm.
inline bool is_norm(const Layer& l) { return l.kind == "layernorm" || l.kind == "rmsnorm"; }
/// The routed assignments per sample a routed-experts layer stands for (experts_layer keeps
/// hidden + up + ffn values for each), from its per-token up and down kernels; 0 for another layer.
double expert_assignments(const Layer& l);

/// A Mixture-of-Experts MLP (Shazeer et al. 2017; Fedus et al. 2021, Switch; Jiang et al. 2024,
/// Mixtral; DeepSeek-AI 2024, DeepSeekMoE and V3): a router sends each token to `top_k` of
/// `experts` FFNs of `expert_ffn`; `shared_experts` FFNs of the same size take every token.
struct MoeShape {
  int experts = 0;          ///< routed experts per MoE layer; 0: a dense model
  int top_k = 0;
  int expert_ffn = 0;
  int shared_experts = 0;
  int dense_layers = 0;     ///< the first layers keep their dense MLP (DeepSeek-V3: 3)
  /// An expert takes at most capacity_factor x tokens x top_k / experts tokens, the rest are
  /// dropped (GShard, Switch); 0: dropless (Megablocks, Mixtral, DeepSeek).
  double capacity_factor = 0.0;
  bool bias = false;        ///< the router and the experts' projections have biases (GPT-OSS)
};

/// What transformers add: the shape parameters the standard FLOP and memory formulas need.
struct TransformerShape {
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;      ///< = heads without grouped-query attention
  int ffn = 0;           ///< intermediate size
  int vocab = 0;
  int seq_len = 0;
  bool swiglu = false;   ///< gated MLP (three matrices)
  bool causal = true;    ///< decoder (GPT, Llama) vs encoder (BERT)
  MoeShape moe;
  /// GELU as the tanh approximation written out in Python, eight elementwise ops (Hugging Face's
  /// NewGELUActivation, GPT-2's "gelu_new"): what an eager run launches (with_eager_kernels).
  bool gelu_tanh = false;
};

struct Model;

/// Layers [first, last] (indices into Model::layers).
struct LayerSpan {
  std::size_t first = 0;
  std::size_t last = 0;
};

/// The dense MLP that layer i belongs to, as Megatron-Core's `mlp` recompute module
/// checkpoints it with Transformer Engine's layers: its linears and activation (the block's
/// contiguous "mlp." layers before the dropout or residual add) and the pre-MLP norm right before
/// them, which Transformer Engine fuses into the first linear. None outside blocks, outside an
/// MLP, and in a MoE layer's MLP (a router, routed or shared experts), which Megatron leaves to
/// its other modules.
std::optional<LayerSpan> dense_mlp(const Model& m, std::size_t i);
/// The MoE MLP that layer i belongs to, as Megatron-Core's `moe` recompute module checkpoints
/// the MoE layer: the router, the routed experts (their dispatch and combine) and the shared
/// experts; its input is the pre-MLP norm's output. None elsewhere.
std::optional<LayerSpan> moe_mlp(const Model& m, std::size_t i);
/// The shared experts of the MoE MLP that layer i belongs to, as the `shared_experts` module
/// checkpoints them (their input is the MoE layer's). None elsewhere.
std::optional<LayerSpan> shared_experts(const Model& m, std::size_t i);

struct Model {
  std::string name;
  std::vector<Layer> layers;  ///< forward order; the last is the loss
  /// Input elements per sample that the host pipeline produces (3x32x32 for CIFAR, s tokens).
  double input_elems = 0.0;
  /// Tokens per sample (sequence length) for transformers; 0 for CNNs.
  int seq_len = 0;
  std::optional<TransformerShape> transformer;

  std::int64_t params() const;
  double fwd_flops() const;  ///< per sample
  double bwd_flops() const;  ///< per sample
};

}  // namespace foresight::strategy
