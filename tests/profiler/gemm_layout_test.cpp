// foresight-profile lays out each GEMM as the framework runs it: the transposes and leading
// dimensions of PyTorch's forward, input- and weight-gradient GEMMs, and Transformer Engine's
// "tn" for FP8; the leading dimensions' alignment is the one the compute model charges for.
#include "profiler/gemm_layout.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "exec/op_signature.hpp"
#include "models/compute_model.hpp"

using namespace foresight;

namespace {

sim::OpSignature layout_gemm(std::string kernel, std::int64_t m, std::int64_t n, std::int64_t k,
                             std::uint8_t axis, sim::DType dtype = sim::DType::bf16) {
  sim::OpSignature s;
  s.type = sim::OpType::gemm;
  s.dtype = dtype;
  s.kernel = std::move(kernel);
  s.shape = {m, n, k, 1};
  s.batch_axis = axis;
  return s;
}

}  // namespace

TEST_CASE("GEMM layouts: PyTorch's tn, nn and nt with its leading dimensions", "[profiler]") {
  // GPT-2's LM head at 8192 tokens: hidden 768, vocabulary 50,257 (models/model_builder.cpp's
  // linear layer: forward {rows, out, in}, input gradient {rows, in, out}, weight gradient
  // {out, in, rows} with the batch on k).
  const prof::GemmLayout fwd = prof::gemm_layout(layout_gemm("linear_fwd", 8192, 50257, 768, 0));
  // Y^T (50257 x 8192, ld 50257) = op_T(W stored 768 x 50257) X^T (768 x 8192).
  REQUIRE((fwd.m == 50257 && fwd.n == 8192 && fwd.k == 768));
  REQUIRE((fwd.a.transposed && !fwd.b.transposed));
  REQUIRE((fwd.a.ld == 768 && fwd.b.ld == 768 && fwd.c.ld == 50257));
  REQUIRE(fwd.alignment_bytes(2, 2) == 2);  // the odd vocabulary is the output's leading dimension

  const prof::GemmLayout dgrad =
      prof::gemm_layout(layout_gemm("linear_dgrad", 8192, 768, 50257, 0));
  REQUIRE((!dgrad.a.transposed && !dgrad.b.transposed));  // "nn"
  REQUIRE((dgrad.a.ld == 768 && dgrad.b.ld == 50257 && dgrad.c.ld == 768));
  REQUIRE((dgrad.m == 768 && dgrad.n == 8192 && dgrad.k == 50257));

  const prof::GemmLayout wgrad =
      prof::gemm_layout(layout_gemm("linear_wgrad", 50257, 768, 8192, 2));
  REQUIRE((!wgrad.a.transposed && wgrad.b.transposed));  // "nt"
  REQUIRE((wgrad.a.ld == 768 && wgrad.b.ld == 50257 && wgrad.c.ld == 768));
  REQUIRE((wgrad.m == 768 && wgrad.n == 50257 && wgrad.k == 8192));

  // Each operand's stored shape holds op(A) (m x k) and op(B) (k x n).
  for (const prof::GemmLayout& l : {fwd, dgrad, wgrad}) {
    REQUIRE((l.a.transposed ? l.a.cols : l.a.rows) == l.m);
    REQUIRE((l.a.transposed ? l.a.rows : l.a.cols) == l.k);
    REQUIRE((l.b.transposed ? l.b.cols : l.b.rows) == l.k);
    REQUIRE((l.b.transposed ? l.b.rows : l.b.cols) == l.n);
    REQUIRE((l.c.rows == l.m && l.c.cols == l.n));
    for (const prof::GemmOperand& o : {l.a, l.b, l.c}) REQUIRE(o.ld == o.rows);
  }

  // FP8 runs tn for every GEMM (Transformer Engine's transposed copies).
  const prof::GemmLayout fp8 =
      prof::gemm_layout(layout_gemm("linear_wgrad", 4096, 1024, 8192, 2, sim::DType::fp8));
  REQUIRE((fp8.a.transposed && !fp8.b.transposed));
  REQUIRE((fp8.a.ld == 8192 && fp8.b.ld == 8192 && fp8.c.ld == 1024));
}

TEST_CASE("GEMM layouts: the profiler's alignment is the compute model's", "[profiler]") {
  // Whichever edge is odd, the measured kernel and the modelled one see the same leading
  // dimensions (the batch edge, free in both, is the only one left out).
  for (const std::int64_t odd : {50257, 1000, 100, 7}) {
    for (const sim::DType dt : {sim::DType::bf16, sim::DType::fp32}) {
      const int bytes = static_cast<int>(sim::dtype_bytes(dt));
      for (const auto& s : {layout_gemm("linear_fwd", 8192, odd, 768, 0, dt),
                            layout_gemm("linear_fwd", 8192, 768, odd, 0, dt),
                            layout_gemm("linear_dgrad", 8192, odd, 768, 0, dt),
                            layout_gemm("linear_dgrad", 8192, 768, odd, 0, dt),
                            layout_gemm("linear_wgrad", odd, 768, 8192, 2, dt),
                            layout_gemm("linear_wgrad", 768, odd, 8192, 2, dt),
                            layout_gemm("linear_fwd", odd, 768, 768, 0, dt),
                            layout_gemm("linear_wgrad", 768, 768, odd, 2, dt)}) {
        INFO(s.kernel << " " << s.shape[0] << "x" << s.shape[1] << "x" << s.shape[2] << " "
                      << sim::to_string(dt));
        REQUIRE(prof::gemm_layout(s).alignment_bytes(bytes, bytes) ==
                strategy::gemm_row_alignment_bytes(s));
      }
    }
  }
}
