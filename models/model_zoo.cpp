#include "models/model_zoo.hpp"

#include <fmt/core.h>

#include <array>
#include <optional>
#include <string>

#include "common/error.hpp"
#include "models/model_builder.hpp"

namespace foresight::strategy {
namespace {

constexpr std::array<ModelInfo, 30> kModels{{
    {"resnet18",
     "ResNet-18, BasicBlock [2,2,2,2], 3x224x224 (He et al. 2016 Table 1; torchvision)"},
    {"resnet34",
     "ResNet-34, BasicBlock [3,4,6,3], 3x224x224 (He et al. 2016 Table 1; torchvision)"},
    {"resnet50",
     "ResNet-50, Bottleneck [3,4,6,3], stride on the 3x3, 3x224x224 (He et al. 2016; torchvision)"},
    {"resnet18-cifar", "ResNet-18 for 3x32x32: 3x3/1 stem, no max-pool (kuangliu/pytorch-cifar)"},
    {"resnet34-cifar", "ResNet-34 for 3x32x32: 3x3/1 stem, no max-pool (kuangliu/pytorch-cifar)"},
    {"resnet50-cifar", "ResNet-50 for 3x32x32: 3x3/1 stem, no max-pool (kuangliu/pytorch-cifar)"},
    {"vgg19",
     "VGG-19, configuration E without batchnorm, 3x224x224 (Simonyan and Zisserman 2015; "
     "torchvision)"},
    {"mobilenet-v2", "MobileNetV2 width 1.0, 3x224x224 (Sandler et al. 2018 Table 2; torchvision)"},
    {"bert-large",
     "BERT-large 24x1024, 16 heads, post-LN, pooler, tied MLM logits, seq 512 (Devlin et al. "
     "2019)"},
    {"gpt2", "GPT-2 124M 12x768, 12 heads, seq 1024 (Radford et al. 2019; HF gpt2)"},
    {"gpt2-medium", "GPT-2 355M 24x1024, 16 heads, seq 1024 (Radford et al. 2019; HF gpt2-medium)"},
    {"gpt2-large", "GPT-2 774M 36x1280, 20 heads, seq 1024 (Radford et al. 2019; HF gpt2-large)"},
    {"gpt2-xl", "GPT-2 1.5B 48x1600, 25 heads, seq 1024 (Radford et al. 2019; HF gpt2-xl)"},
    {"gpt3-125m", "GPT-3 Small 12x768, 12 heads, seq 2048 (Brown et al. 2020 Table 2.1)"},
    {"gpt3-350m", "GPT-3 Medium 24x1024, 16 heads, seq 2048 (Brown et al. 2020 Table 2.1)"},
    {"gpt3-760m", "GPT-3 Large 24x1536, 16 heads, seq 2048 (Brown et al. 2020 Table 2.1)"},
    {"gpt3-1.3b", "GPT-3 XL 24x2048, 16 heads of 128, seq 2048 (Brown et al. 2020 Table 2.1)"},
    {"gpt3-2.7b", "GPT-3 2.7B 32x2560, 32 heads, seq 2048 (Brown et al. 2020 Table 2.1)"},
    {"gpt3-6.7b", "GPT-3 6.7B 32x4096, 32 heads, seq 2048 (Brown et al. 2020 Table 2.1)"},
    {"gpt3-13b", "GPT-3 13B 40x5120, 40 heads of 128, seq 2048 (Brown et al. 2020 Table 2.1)"},
    {"gpt3-175b", "GPT-3 175B 96x12288, 96 heads, seq 2048 (Brown et al. 2020 Table 2.1)"},
    {"llama2-7b",
     "Llama 2 7B 32x4096, 32 heads, FFN 11008, seq 4096 (Touvron et al. 2023; HF config)"},
    {"llama2-13b",
     "Llama 2 13B 40x5120, 40 heads, FFN 13824, seq 4096 (Touvron et al. 2023; HF config)"},
    {"llama2-70b",
     "Llama 2 70B 80x8192, 64 heads, 8 KV heads, FFN 28672, seq 4096 (Touvron et al. 2023)"},
    {"llama3-8b",
     "Llama 3 8B 32x4096, 32 heads, 8 KV heads, FFN 14336, vocab 128256, seq 8192 (Meta 2024)"},
    {"llama3-70b",
     "Llama 3 70B 80x8192, 64 heads, 8 KV heads, FFN 28672, vocab 128256, seq 8192 (Meta 2024)"},
    {"mixtral-8x7b",
     "Mixtral 8x7B 32x4096, 32 heads, 8 KV heads, 8 experts of FFN 14336, top-2, seq 4096 (Jiang et al. 2024)"},
    {"mixtral-8x22b",
     "Mixtral 8x22B 56x6144, 48 heads, 8 KV heads, 8 experts of FFN 16384, top-2, vocab 32768, seq 4096 (HF config)"},
    {"deepseek-v3-moe",
     "DeepSeek-V3-like 61x7168, 128 heads (MLA as dense attention), 3 dense layers of FFN 18432, then 256 experts of "
     "2048 + 1 shared, top-8, vocab 129280, seq 4096 (DeepSeek-AI 2024)"},
    {"switch-gpt-1.3b-64e",
     "Switch-style top-1: GPT-3 XL 24x2048 with 64 experts of FFN 8192 in every layer, capacity factor 1.25 "
     "(Fedus et al. 2021)"},
}};

/// GPT-2 and GPT-3: pre-LN, learned positions, GELU MLP of 4 h, biases, dropout, LM head tied to
/// the 50257-token BPE embedding (Radford et al. 2019 §2.3; Brown et al. 2020 §2.1). GPT-3's
/// alternating locally banded sparse attention is modelled as dense.
TransformerSpec gpt(std::string_view name, int layers, int hidden, int heads, int positions) {
  TransformerSpec s;
  s.name = name;
  s.shape = TransformerShape{.layers = layers,
                             .hidden = hidden,
                             .heads = heads,
                             .kv_heads = heads,
                             .ffn = 4 * hidden,
                             .vocab = 50257,
                             .seq_len = positions,
                             .swiglu = false,
                             .causal = true,
                             .moe = {}};
  s.positions = positions;
  return s;
}

/// Llama 2 and 3: pre-norm RMSNorm, RoPE, SwiGLU, no biases, no dropout, untied LM head
/// (Touvron et al. 2023 §2.2; HF LlamaConfig defaults).
TransformerSpec llama(std::string_view name, int layers, int hidden, int heads, int kv_heads,
                      int ffn, int vocab, int seq_len) {
  TransformerSpec s;
  s.name = name;
  s.shape = TransformerShape{.layers = layers,
                             .hidden = hidden,
                             .heads = heads,
                             .kv_heads = kv_heads,
                             .ffn = ffn,
                             .vocab = vocab,
                             .seq_len = seq_len,
                             .swiglu = true,
                             .causal = true,
                             .moe = {}};
  s.norm = Norm::rmsnorm;
  s.qkv_bias = false;
  s.proj_bias = false;
  s.mlp_bias = false;
  s.tied_embeddings = false;
  s.hidden_dropout = false;
  s.attention_dropout = false;
  return s;
}

/// `s` with Mixture-of-Experts MLPs.
TransformerSpec moe(TransformerSpec s, int experts, int top_k, int expert_ffn, int shared, int dense_layers) {
  s.shape.moe = MoeShape{.experts = experts,
                         .top_k = top_k,
                         .expert_ffn = expert_ffn,
                         .shared_experts = shared,
                         .dense_layers = dense_layers,
                         .capacity_factor = 0.0};
  return s;
}

/// BERT-large (Devlin et al. 2019 §3): 24 layers, hidden 1024, 16 heads, FFN 4096, WordPiece
/// vocabulary 30522, 512 positions, 2 token types, GELU, post-LN with an embedding LayerNorm,
/// dropout, the pooler, logits over the vocabulary tied to the word embedding (without the MLM
/// transform). Sequence 512 (its pre-training's longest phase).
TransformerSpec bert_large() {
  TransformerSpec s;
  s.name = "bert-large";
  s.shape = TransformerShape{.layers = 24,
                             .hidden = 1024,
                             .heads = 16,
                             .kv_heads = 16,
                             .ffn = 4096,
                             .vocab = 30522,
                             .seq_len = 512,
                             .swiglu = false,
                             .causal = false,
                             .moe = {}};
  s.positions = 512;
  s.token_types = 2;
  s.pre_norm = false;
  s.pooler = true;
  return s;
}

std::optional<TransformerSpec> transformer_spec(std::string_view name) {
  if (name == "bert-large") return bert_large();
  // Radford et al. 2019 Table 2 and the HF configs: 1024 positions.
  // HF's GPT-2 configs: activation_function "gelu_new".
  const auto gpt2 = [&](int layers, int hidden, int heads) {
    TransformerSpec s = gpt(name, layers, hidden, heads, 1024);
    s.shape.gelu_tanh = true;
    return s;
  };
  if (name == "gpt2") return gpt2(12, 768, 12);
  if (name == "gpt2-medium") return gpt2(24, 1024, 16);
  if (name == "gpt2-large") return gpt2(36, 1280, 20);
  if (name == "gpt2-xl") return gpt2(48, 1600, 25);
  // Brown et al. 2020 Table 2.1, n_ctx 2048. The table's XL row (24 heads of 128) does not
  // multiply to d_model 2048: 16 heads of 128 are used. Its 13B row prints d_model 5140, which
  // 40 heads of 128 do not give: 5120 = 40 x 128 is used.
  if (name == "gpt3-125m") return gpt(name, 12, 768, 12, 2048);
  if (name == "gpt3-350m") return gpt(name, 24, 1024, 16, 2048);
  if (name == "gpt3-760m") return gpt(name, 24, 1536, 16, 2048);
  if (name == "gpt3-1.3b") return gpt(name, 24, 2048, 16, 2048);
  if (name == "gpt3-2.7b") return gpt(name, 32, 2560, 32, 2048);
  if (name == "gpt3-6.7b") return gpt(name, 32, 4096, 32, 2048);
  if (name == "gpt3-13b") return gpt(name, 40, 5120, 40, 2048);
  if (name == "gpt3-175b") return gpt(name, 96, 12288, 96, 2048);
  // Touvron et al. 2023 Table 1 and meta-llama/Llama-2-*-hf config.json: vocabulary 32000,
  // context 4096.
  if (name == "llama2-7b") return llama(name, 32, 4096, 32, 32, 11008, 32000, 4096);
  if (name == "llama2-13b") return llama(name, 40, 5120, 40, 40, 13824, 32000, 4096);
  if (name == "llama2-70b") return llama(name, 80, 8192, 64, 8, 28672, 32000, 4096);
  // meta-llama/Meta-Llama-3-*B config.json: vocabulary 128256, context 8192.
  if (name == "llama3-8b") return llama(name, 32, 4096, 32, 8, 14336, 128256, 8192);
  if (name == "llama3-70b") return llama(name, 80, 8192, 64, 8, 28672, 128256, 8192);
  // mistralai/Mixtral-8x7B-v0.1 and -8x22B-v0.1 config.json: num_local_experts 8,
  // num_experts_per_tok 2; the dense FFN size is each expert's. Sequence 4096 as trained.
  if (name == "mixtral-8x7b") return moe(llama(name, 32, 4096, 32, 8, 14336, 32000, 4096), 8, 2, 14336, 0, 0);
  if (name == "mixtral-8x22b") return moe(llama(name, 56, 6144, 48, 8, 16384, 32768, 4096), 8, 2, 16384, 0, 0);
  // deepseek-ai/DeepSeek-V3 config.json: 61 layers, hidden 7168, 128 heads, first_k_dense_replace
  // 3 with intermediate_size 18432, n_routed_experts 256 of moe_intermediate_size 2048,
  // n_shared_experts 1, num_experts_per_tok 8, vocabulary 129280. Multi-head latent attention
  // and multi-token prediction are modelled as dense attention and one head.
  if (name == "deepseek-v3-moe") return moe(llama(name, 61, 7168, 128, 128, 18432, 129280, 4096), 256, 8, 2048, 1, 3);
  // Switch Transformer (Fedus et al. 2021): top-1 routing with capacity factor 1.25, here on a
  // GPT-3 XL-sized decoder with 64 experts in every layer.
  if (name == "switch-gpt-1.3b-64e") {
    auto s = moe(gpt(name, 24, 2048, 16, 2048), 64, 1, 8192, 0, 0);
    s.shape.moe.capacity_factor = 1.25;
    return s;
  }
  return std::nullopt;
}

/// The CNNs; nullopt for other names. `classes` 0: the default.
std::optional<Model> build_cnn(std::string_view name, int classes) {
  const auto resnet = [&](bool bottleneck, std::array<int, 4> blocks, bool cifar) {
    // ImageNet-1k's 1000 classes; CIFAR-100's 100 for the CIFAR variants.
    const int default_classes = cifar ? 100 : 1000;
    return build_resnet(ResNetSpec{std::string(name), bottleneck, blocks, cifar,
                                   classes > 0 ? classes : default_classes});
  };
  // Blocks per stage: He et al. 2016 Table 1.
  if (name == "resnet18") return resnet(false, {2, 2, 2, 2}, false);
  if (name == "resnet34") return resnet(false, {3, 4, 6, 3}, false);
  if (name == "resnet50") return resnet(true, {3, 4, 6, 3}, false);
  if (name == "resnet18-cifar") return resnet(false, {2, 2, 2, 2}, true);
  if (name == "resnet34-cifar") return resnet(false, {3, 4, 6, 3}, true);
  if (name == "resnet50-cifar") return resnet(true, {3, 4, 6, 3}, true);
  if (name == "vgg19") return build_vgg19(std::string(name), classes > 0 ? classes : 1000);
  if (name == "mobilenet-v2")
    return build_mobilenet_v2(std::string(name), classes > 0 ? classes : 1000);
  return std::nullopt;
}

std::string known_names() {
  std::string out;
  for (const ModelInfo& m : kModels) {
    if (!out.empty()) out += ", ";
    out += m.name;
  }
  return out;
}

}  // namespace

std::span<const ModelInfo> known_models() { return kModels; }

Model build_model(std::string_view name, int classes, int seq_len) {
  if (classes < 0)
    throw sim::ModelError(
        fmt::format("model {}: classes must be positive, found {}", name, classes));
  if (seq_len < 0)
    throw sim::ModelError(
        fmt::format("model {}: seq_len must be positive, found {}", name, seq_len));
  if (std::optional<TransformerSpec> spec = transformer_spec(name)) {
    if (classes != 0) {
      throw sim::ModelError(fmt::format(
          "model {} is a transformer: classes ({}) applies to the CNNs only", name, classes));
    }
    if (seq_len > 0) spec->shape.seq_len = seq_len;
    return build_transformer(*spec);
  }
  if (std::optional<Model> m = build_cnn(name, classes)) {
    if (seq_len != 0) {
      throw sim::ModelError(fmt::format(
          "model {} is a CNN: seq_len ({}) applies to transformers only", name, seq_len));
    }
    return std::move(*m);
  }
  throw sim::ModelError(fmt::format("unknown model \"{}\"; known models: {}", name, known_names()));
}

}  // namespace foresight::strategy
