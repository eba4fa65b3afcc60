#include "exec/op_signature.hpp"

#include <fmt/core.h>

#include <array>

#include "common/error.hpp"

namespace foresight::sim {
namespace {

constexpr std::array<std::string_view, kOpTypeCount> kOpTypes{"gemm",       "conv_fprop", "conv_dgrad",
                                                              "conv_wgrad", "attention",  "memory"};
constexpr std::array<std::string_view, kDTypeCount> kDTypes{"fp32", "tf32", "fp16", "bf16", "fp8"};

template <typename E, std::size_t N>
E parse_from(const std::array<std::string_view, N>& names, std::string_view text, std::string_view where,
             std::string_view what) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == text) return static_cast<E>(i);
  }
  std::string known;
  for (const auto n : names) known += (known.empty() ? "" : ", ") + std::string(n);
  throw ConfigError(fmt::format("{}: expected {} ({}), found \"{}\"", where, what, known, text));
}

}  // namespace

std::string_view to_string(OpType t) { return kOpTypes.at(static_cast<std::size_t>(t)); }
OpType parse_op_type(std::string_view text, std::string_view where) {
  return parse_from<OpType>(kOpTypes, text, where, "a kernel type");
}
std::string_view to_string(DType d) { return kDTypes.at(static_cast<std::size_t>(d)); }
DType parse_dtype(std::string_view text, std::string_view where) {
  return parse_from<DType>(kDTypes, text, where, "a data type");
}

int dtype_bytes(DType d) {
  switch (d) {
    case DType::fp32:
    case DType::tf32:
      return 4;
    case DType::fp16:
    case DType::bf16:
      return 2;
    case DType::fp8:
      return 1;
  }
  return 4;
}

std::string OpSignature::key() const {
  std::string dims;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) dims += 'x';
    if (i == batch_axis) {
      dims += '_';
    } else {
      dims += std::to_string(shape[i]);
    }
  }
  return fmt::format("{} {} {}", kernel, to_string(dtype), dims.empty() ? "-" : dims);
}

}  // namespace foresight::sim
