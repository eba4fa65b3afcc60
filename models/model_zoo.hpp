#pragma once
/// The models Foresight knows by name, and Hugging Face config.json import. Every count is
/// computed from layer shapes by the builders (models/model_builder.hpp).

#include <span>
#include <string>
#include <string_view>

#include "models/model.hpp"

namespace foresight::strategy {

struct ModelInfo {
  std::string_view name;
  std::string_view description;  ///< one line, with the source of its shape
};

/// Names of the zoo, for `foresight --list` and error messages:
/// resnet18, resnet34, resnet50 (ImageNet 224x224), resnet18-cifar, resnet34-cifar,
/// resnet50-cifar (32x32: 3x3 stem, no max-pool), vgg19, mobilenet-v2, bert-large, gpt2,
/// gpt2-medium, gpt2-large, gpt2-xl, gpt3-125m, gpt3-350m, gpt3-760m, gpt3-1.3b, gpt3-2.7b,
/// gpt3-6.7b, gpt3-13b, gpt3-175b, llama2-7b, llama2-13b, llama2-70b, llama3-8b, llama3-70b.
std::span<const ModelInfo> known_models();

/// Builds a zoo model. `classes` overrides the classifier size of CNNs (0: the model's default:
/// 1000 for ImageNet variants, 100 for CIFAR variants, as in CIFAR-100); `seq_len` overrides
/// the sequence length of transformers (0: the model's default). ModelError listing the known
/// names for an unknown one.
Model build_model(std::string_view name, int classes = 0, int seq_len = 0);

/// Builds a decoder-only transformer from a Hugging Face config.json (GPT-2 style n_embd/n_layer/
/// n_head or Llama/Mistral style hidden_size/num_hidden_layers/num_attention_heads/
/// num_key_value_heads/intermediate_size, hidden_act silu -> SwiGLU, tie_word_embeddings).
/// Keys it does not need are ignored (the file is another tool's); a missing or mistyped key it
/// needs is a ModelError naming the file and key.
Model load_hf_config(const std::string& path, int seq_len = 0);

}  // namespace foresight::strategy
