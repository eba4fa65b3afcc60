// libFuzzer target: fuzz_chakra (fuzz/targets.hpp). Built with -Dfuzz=enabled; run by scripts/fuzz.sh.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>

#include "fuzz/targets.hpp"

// Protobuf logs every string field that is not UTF-8 to stderr; the parse fails all the same
// (a TraceError), so the log only slows the fuzzer down.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return foresight::fuzz::fuzz_one("chakra", data, size);
}
