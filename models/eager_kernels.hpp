#pragma once
/// A transformer as PyTorch eager runs Hugging Face transformers' modules (plan.kernels "eager")
/// or torchtitan's Llama without torch.compile (plan.kernels "torchtitan"): the kernels its
/// Python code launches one by one, instead of the fused kernels of Megatron-LM and Transformer
/// Engine that the model builder lists. See docs/models.md, "Eager kernels", for the list and
/// what it was checked against.

#include <cstdint>

#include "models/model.hpp"

namespace foresight::strategy {

/// How a model writes rotary embeddings: Hugging Face's apply_rotary_pos_emb (x cos +
/// rotate_half(x) sin with fp32 cos and sin) or torchtitan's apply_rotary_emb (x in fp32 viewed as
/// complex numbers, times the complex frequencies).
enum class RopeStyle : std::uint8_t { hf, complex };

/// The dtypes an eager run keeps its tensors in, and what its modules' code does.
struct EagerOptions {
  int activation = 2;  ///< bytes of a GEMM's output (autocast's lower dtype, or the precision's)
  /// torch.autocast: fp32 weights cast before each GEMM, and an fp32 residual stream (norms and
  /// residual adds in fp32, their outputs cast before the next GEMM).
  bool autocast = false;
  /// Decoders append each key and value to an empty cache (Hugging Face's use_cache, which its
  /// models turn off under gradient checkpointing).
  bool kv_cache = true;
  RopeStyle rope = RopeStyle::hf;
};

/// `model` with its transformer layers' memory-bound kernels replaced by what eager PyTorch
/// launches, each with its bytes and its sim::MemoryPath:
/// - linear layers: under autocast, the weight and bias casts (fp32 to the GEMM dtype) in every forward,
///   the input cast where the input is fp32 (after a norm, a residual add or an fp32 GELU; one
///   per separate projection), and in backward the weight gradient's and such an input
///   gradient's cast back to fp32 (cast path); a bias gradient reduction; separate projections
///   (matmul_widths) sum their input gradients;
/// - LayerNorm: one forward kernel, two backward (input gradient; gamma and beta, a strided
///   column reduction); RMSNorm as Hugging Face's LlamaRMSNorm writes it (pow, mean, rsqrt, two
///   broadcast multiplies; twelve kernels backward);
/// - GELU with gelu_tanh: the eight ops of NewGELUActivation (autocast runs pow, and so what
///   follows, in fp32); SwiGLU as silu(gate) * up (two kernels, three backward);
/// - residual adds: a GEMM-dtype branch plus the fp32 stream under autocast (cast path); in
///   backward, the accumulation of the stream's gradient and its cast for the branch;
/// - attention (decoders): the key and value concatenated onto an empty cache (strided cats);
///   RoPE as apply_rotary_pos_emb writes it (two broadcast multiplies, a negation, a cat and an
///   add per query and key); in backward, the query, key and value gradients copied back from
///   the heads' layout (strided);
/// - the loss: logits upcast to fp32 (HF's ForCausalLMLoss), log-softmax and its backward in fp32,
///   the gradient zero-filled first and cast back.
/// Each rewritten layer also states what its ops keep for backward (Layer::saved_bytes) and, where
/// it is fp32, its output's size (Layer::output_bytes): LayerNorm its input; RMSNorm its input
/// and the normalized tensor; NewGELU pow's input, tanh's output and the last product's
/// operands; SwiGLU the gate, SiLU's output and up; each projection its cast input; the loss
/// log-softmax's fp32 output (and the LM head's logits count as fp32, upcast for the loss).
/// Layer FLOPs (what MFU counts) are unchanged. Expert and router layers keep their kernels.
Model with_eager_kernels(Model model, EagerOptions options);

}  // namespace foresight::strategy
