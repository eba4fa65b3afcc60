// libFuzzer target: fuzz_pytorch_et (fuzz/targets.hpp). Built with -Dfuzz=enabled; run by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include "fuzz/targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return foresight::fuzz::fuzz_one("pytorch_et", data, size);
}
