#include "strategies/plan.hpp"

namespace foresight::strategy {

std::string_view to_string(Precision p) {
  switch (p) {
    case Precision::fp32:
      return "fp32";
    case Precision::amp_fp16:
      return "amp_fp16";
    case Precision::amp_bf16:
      return "amp_bf16";
    case Precision::fp16:
      return "fp16";
    case Precision::bf16:
      return "bf16";
  }
  return "?";
}

std::string_view to_string(Framework f) { return f == Framework::ddp ? "ddp" : "horovod"; }
std::string_view to_string(Optimizer o) { return o == Optimizer::sgd ? "sgd" : "adam"; }

int activation_bytes(Precision p) { return p == Precision::fp32 ? 4 : 2; }

// autocast keeps fp32 weights and fp32 gradients (torch.amp docs); pure half precision stores both in 2 bytes.
int parameter_bytes(Precision p) { return (p == Precision::fp16 || p == Precision::bf16) ? 2 : 4; }
int gradient_bytes(Precision p) { return parameter_bytes(p); }

}  // namespace foresight::strategy
