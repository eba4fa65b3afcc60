#include "validate/kernel_sweep_dataset.hpp"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "models/compute_model.hpp"
#include "strategies/rank_emitter.hpp"
#include "topologies/gpu_spec.hpp"
#include "validate/dataset_fields.hpp"

namespace foresight::validate {
namespace {

using nlohmann::json;
using sim::DType;
using sim::OpSignature;
using sim::OpType;

/// Keys every row carries (scripts/gpu/kernel_sweep.py), whatever its family.
constexpr std::string_view kCommon[] = {"family", "op", "dtype", "seconds", "p10_seconds", "p90_seconds", "flops",
                                        "bytes",  "tflops", "gbps", "reps", "rotating_sets"};

std::vector<std::string_view> keys(std::initializer_list<std::string_view> own) {
  std::vector<std::string_view> k(std::begin(kCommon), std::end(kCommon));
  k.insert(k.end(), own);
  return k;
}

std::int64_t dim(const topo::JsonReader& r, const json& o, std::string_view key, const topo::JsonPath& p) {
  return r.integer_at(o, key, p, "a row", 1, std::int64_t{1} << 40);
}

DType row_dtype(const topo::JsonReader& r, const json& o, const topo::JsonPath& p) {
  const std::string d = r.string_at(o, "dtype", p, "a row");
  if (d == "fp8_e4m3") return DType::fp8;
  if (d == "fp32" || d == "tf32" || d == "fp16" || d == "bf16") return sim::parse_dtype(d, "");
  r.fail(p.at("dtype"), fmt::format("expected fp32, tf32, fp16, bf16 or fp8_e4m3, found \"{}\"", d));
}

OpSignature gemm(DType dtype, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, double bytes) {
  OpSignature s;
  s.type = OpType::gemm;
  s.dtype = dtype;
  s.kernel = "matmul";
  s.shape = {m, n, k, batch};
  s.flops = 2.0 * double(m) * double(n) * double(k) * double(batch);
  s.bytes = bytes;
  return s;
}

KernelCase read_row(const topo::JsonReader& r, const json& o, const topo::JsonPath& p) {
  const std::string family = r.string_at(o, "family", p, "a row");
  const std::string op = r.string_at(o, "op", p, "a row");
  KernelCase c;
  const DType dtype = row_dtype(r, o, p);
  const std::string dtype_text = r.string_at(o, "dtype", p, "a row");
  const double bytes = r.number_at(o, "bytes", p, "a row");
  if (family == "gemm" || family == "bmm" || family == "fp8") {
    r.check_object(o, keys({"m", "n", "k", "batch", "layout", "tag", "s", "d"}), p, "a GEMM row");
    const std::int64_t m = dim(r, o, "m", p), n = dim(r, o, "n", p), k = dim(r, o, "k", p), b = dim(r, o, "batch", p);
    c.family = KernelFamily::gemm;
    c.kernels = {gemm(dtype, m, n, k, b, bytes)};
    const std::string layout = r.string_at(o, "layout", p, "a row");
    // TN (A stored k x m) has rows along m and n; NN and NT along k and n, as the model's forward
    // and input-gradient GEMMs (compute_model.hpp, gemm_row_alignment_bytes).
    c.kernels.front().batch_axis = layout == "tn" ? 2 : 0;
    c.id = fmt::format("{}/{}/{}{}x{}x{}/{}", family, dtype_text, b > 1 ? fmt::format("{}x", b) : "", m, n, k, layout);
    c.note = fmt::format("{} ({})", op, r.string_at(o, "tag", p, "a row"));
  } else if (family == "attention") {
    r.check_object(o, keys({"b", "h", "s", "d", "causal", "backend"}), p, "an attention row");
    const std::int64_t b = dim(r, o, "b", p), h = dim(r, o, "h", p), s = dim(r, o, "s", p), d = dim(r, o, "d", p);
    const bool causal = r.require(o, "causal", p, "a row").get<bool>();
    const std::string backend = r.string_at(o, "backend", p, "a row");
    OpSignature f;
    f.type = OpType::attention;
    f.dtype = dtype;
    f.kernel = "flash_attn_fwd";
    const std::int64_t kernel = backend == "flash"   ? strategy::kAttentionFlash2
                                : backend == "cudnn" ? strategy::kAttentionCudnn
                                                     : strategy::kAttentionOther;
    f.shape = {b * h, s, s, d, causal ? 1 : 0, kernel};
    f.flops = 4.0 * double(b * h) * double(s) * double(s) * double(d) * (causal ? 0.5 : 1.0);
    f.bytes = 4.0 * double(b * h * s * d) * sim::dtype_bytes(dtype);
    c.family = KernelFamily::attention;
    c.kernels = {f};
    if (op == "sdpa_fwd_bwd") {
      OpSignature bwd = f;
      bwd.kernel = "flash_attn_bwd";
      bwd.flops = 2.5 * f.flops;
      bwd.bytes = 2.0 * f.bytes;
      c.kernels.push_back(bwd);
    } else if (op != "sdpa_fwd") {
      r.fail(p.at("op"), fmt::format("expected sdpa_fwd or sdpa_fwd_bwd, found \"{}\"", op));
    }
    c.id = fmt::format("attention/{}/{}/b{}h{}s{}d{}{}", dtype_text, op, b, h, s, d, causal ? "/causal" : "");
    c.note = fmt::format("scaled_dot_product_attention, {} backend", backend);
  } else if (family == "conv") {
    r.check_object(o, keys({"layout", "net", "n", "c", "h", "w", "k", "r", "s", "stride", "pad", "groups", "oh", "ow"}),
                   p, "a convolution row");
    OpSignature f;
    f.dtype = dtype;
    f.shape = {dim(r, o, "n", p), dim(r, o, "c", p), dim(r, o, "h", p), dim(r, o, "w", p), dim(r, o, "k", p),
               dim(r, o, "r", p), dim(r, o, "s", p), dim(r, o, "stride", p),
               r.integer_at(o, "pad", p, "a row", 0, 1 << 20), dim(r, o, "groups", p)};
    f.flops = r.number_at(o, "flops", p, "a row");
    f.bytes = bytes;
    c.family = KernelFamily::conv;
    if (op == "conv_fwd") {
      f.type = OpType::conv_fprop;
      f.kernel = "conv2d";
      c.kernels = {f};
    } else if (op == "conv_bwd") {
      f.flops *= 0.5;  // the row counts dgrad and wgrad: each is one forward's
      f.bytes *= 0.5;
      OpSignature dgrad = f, wgrad = f;
      dgrad.type = OpType::conv_dgrad;
      dgrad.kernel = "conv2d_dgrad";
      wgrad.type = OpType::conv_wgrad;
      wgrad.kernel = "conv2d_wgrad";
      c.kernels = {dgrad, wgrad};
    } else {
      r.fail(p.at("op"), fmt::format("expected conv_fwd or conv_bwd, found \"{}\"", op));
    }
    c.id = fmt::format("conv/{}/{}/{}", dtype_text, op, fmt::join(f.shape, "x"));
    c.note = fmt::format("{} layer, {}", r.string_at(o, "net", p, "a row"), r.string_at(o, "layout", p, "a row"));
  } else if (family == "memory") {
    r.check_object(o, keys({"size_bytes", "shape"}), p, "a memory-bound row");
    OpSignature m;
    m.type = OpType::memory;
    m.dtype = dtype;
    m.kernel = op;
    m.bytes = bytes;
    // The file counts an AdamW step's bytes as fused, 28 per parameter; the simulator's foreach
    // step makes one pass per arithmetic operation (strategies/rank_emitter.hpp), so a foreach row
    // is predicted with the bytes the simulator charges.
    const bool adamw = op.rfind("adamw", 0) == 0;
    const bool foreach = op == "adamw_foreach";
    if (foreach) {
      m.bytes = bytes / strategy::optimizer_bytes_per_param(strategy::Optimizer::adam, strategy::OptimizerImpl::fused) *
                strategy::optimizer_bytes_per_param(strategy::Optimizer::adam, strategy::OptimizerImpl::foreach);
    }
    c.family = KernelFamily::memory;
    c.kernels = {m};
    c.id = fmt::format("memory/{}/{}/{}", dtype_text, op, r.integer_at(o, "size_bytes", p, "a row", 1, std::int64_t{1} << 40));
    c.note = !adamw    ? "bytes: each input read once, each output written once"
             : foreach ? "an optimizer step over 16 tensors; bytes as the simulator's foreach step moves them (80 per parameter)"
                       : "an optimizer step over 16 tensors; bytes counted as fused (28 per parameter)";
  } else {
    r.fail(p.at("family"), fmt::format("expected gemm, bmm, fp8, attention, conv or memory, found \"{}\"", family));
  }
  c.measured_s = r.number_at(o, "seconds", p, "a row");
  if (!(c.measured_s > 0.0)) r.fail(p.at("seconds"), fmt::format("expected a positive time, found {}", c.measured_s));
  return c;
}

}  // namespace

KernelSweep load_kernel_sweep(const std::string& path) {
  const topo::JsonReader r(path, sim::ErrorKind::config);
  const json doc = r.parse_file();
  const topo::JsonPath root;
  r.check_object(doc, {"description", "source", "gpu", "provenance", "calibration_cases", "rows"}, root, "a kernel sweep");
  KernelSweep s;
  s.source = r.string_at(doc, "source", root, "the sweep");
  s.gpu = catalog_gpu_at(r, doc, "gpu", root, "the sweep");
  const json& rows = r.array_at(doc, "rows", root, "the sweep");
  std::map<std::string, int> seen;  // a shape measured twice (two tags) keeps both, numbered
  for (std::size_t i = 0; i < rows.size(); ++i) {
    KernelCase c = read_row(r, rows[i], root.at("rows").at(i));
    if (const int n = seen[c.id]++; n > 0) c.id += fmt::format("#{}", n + 1);
    s.cases.push_back(std::move(c));
  }
  if (doc.contains("calibration_cases")) {
    const json& ids = r.array_at(doc, "calibration_cases", root, "the sweep");
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const topo::JsonPath p = root.at("calibration_cases").at(i);
      if (!ids[i].is_string()) r.fail(p, fmt::format("expected a case id (a string), found {}", ids[i].dump()));
      const std::string id = ids[i].get<std::string>();
      auto it = std::find_if(s.cases.begin(), s.cases.end(), [&](const KernelCase& c) { return c.id == id; });
      if (it == s.cases.end()) r.fail(p, fmt::format("expected the id of a row, found \"{}\"", id));
      it->role = Role::calibration;
    }
  }
  return s;
}

std::vector<KernelResult> evaluate_kernel_sweep(const KernelSweep& sweep, KernelFamily family) {
  const strategy::ComputeModel model(topo::find_gpu_spec(sweep.gpu));
  std::vector<KernelResult> out;
  for (const KernelCase& c : sweep.cases) {
    if (c.family != family) continue;
    double t = 0.0;
    for (const OpSignature& k : c.kernels) t += model.analytical(k).seconds();
    out.push_back({&c, t});
  }
  return out;
}

namespace {

/// The sweep's case `id`, which fits `constant` of the `kind` model: ConfigError when the sweep
/// lacks it or does not declare it a calibration case.
const KernelCase& declared_row(const KernelSweep& sweep, std::string_view kind, const char* constant, const char* id) {
  const auto it = std::find_if(sweep.cases.begin(), sweep.cases.end(), [&](const KernelCase& c) { return c.id == id; });
  if (it == sweep.cases.end() || it->role != Role::calibration) {
    throw sim::ConfigError(fmt::format("{}: the {} constant {} is fitted on case \"{}\", which the sweep does not {}",
                                       sweep.source, kind, constant, id,
                                       it == sweep.cases.end() ? "have" : "declare a calibration case"));
  }
  return *it;
}

}  // namespace

const std::array<ConvCalibrationRow, 9> kConvCalibration{{
    // VGG-19 512 -> 512 at 28 x 28: compute-bound.
    {"compute_fprop", &strategy::ConvConstants::compute_fprop, "conv/bf16/conv_fwd/64x512x28x28x512x3x3x1x1x1"},
    {"compute_bwd", &strategy::ConvConstants::compute_bwd, "conv/bf16/conv_bwd/64x512x28x28x512x3x3x1x1x1"},
    // ResNet-50 1x1 256 -> 64 at 56 x 56: its bytes decide.
    {"memory_fprop", &strategy::ConvConstants::memory_fprop, "conv/bf16/conv_fwd/64x256x56x56x64x1x1x1x0x1"},
    {"memory_bwd", &strategy::ConvConstants::memory_bwd, "conv/bf16/conv_bwd/64x256x56x56x64x1x1x1x0x1"},
    // ResNet-50's stem.
    {"thin_fprop", &strategy::ConvConstants::thin_fprop, "conv/bf16/conv_fwd/64x3x224x224x64x7x7x2x3x1"},
    {"thin_bwd", &strategy::ConvConstants::thin_bwd, "conv/bf16/conv_bwd/64x3x224x224x64x7x7x2x3x1"},
    // MobileNetV2's depthwise 3x3 on 144 channels.
    {"depthwise_fprop", &strategy::ConvConstants::depthwise_fprop, "conv/bf16/conv_fwd/64x144x56x56x144x3x3x1x1x144"},
    {"depthwise_bwd", &strategy::ConvConstants::depthwise_bwd, "conv/bf16/conv_bwd/64x144x56x56x144x3x3x1x1x144"},
    // The smallest call.
    {"overhead", nullptr, "conv/bf16/conv_fwd/128x128x16x16x256x1x1x2x0x1"},
}};

const std::array<ConvCalibrationRow, 9> kConvCalibrationTf32{{
    {"compute_fprop", &strategy::ConvConstants::compute_fprop, "conv/tf32/conv_fwd/64x256x56x56x256x3x3x1x1x1"},
    {"compute_bwd", &strategy::ConvConstants::compute_bwd, "conv/tf32/conv_bwd/64x256x56x56x256x3x3x1x1x1"},
    {"memory_fprop", &strategy::ConvConstants::memory_fprop, "conv/tf32/conv_fwd/64x256x56x56x64x1x1x1x0x1"},
    {"memory_bwd", &strategy::ConvConstants::memory_bwd, "conv/tf32/conv_bwd/64x256x56x56x64x1x1x1x0x1"},
    {"thin_fprop", &strategy::ConvConstants::thin_fprop, "conv/tf32/conv_fwd/64x3x224x224x64x7x7x2x3x1"},
    {"thin_bwd", &strategy::ConvConstants::thin_bwd, "conv/tf32/conv_bwd/64x3x224x224x64x7x7x2x3x1"},
    {"depthwise_fprop", &strategy::ConvConstants::depthwise_fprop, "conv/tf32/conv_fwd/64x32x112x112x32x3x3x1x1x32"},
    {"depthwise_bwd", &strategy::ConvConstants::depthwise_bwd, "conv/tf32/conv_bwd/64x32x112x112x32x3x3x1x1x32"},
    {"overhead", nullptr, "conv/tf32/conv_fwd/128x128x16x16x128x3x3x1x1x1"},
}};

strategy::ConvConstants fit_conv_constants(const KernelSweep& sweep, std::span<const ConvCalibrationRow> calibration) {
  const strategy::ComputeModel model(topo::find_gpu_spec(sweep.gpu));
  struct Row {
    double* constant = nullptr;  // null: the overhead
    std::vector<strategy::ComputeModel::ConvPass> passes;
    double measured = 0.0;
  };
  strategy::ConvConstants k;
  k.overhead = sim::Time{};
  std::vector<Row> rows;
  for (const ConvCalibrationRow& spec : calibration) {
    const KernelCase& c = declared_row(sweep, "convolution", spec.constant, spec.case_id);
    Row r{spec.member != nullptr ? &(k.*spec.member) : nullptr, {}, c.measured_s};
    for (const OpSignature& s : c.kernels) r.passes.push_back(model.conv_pass(s));
    rows.push_back(std::move(r));
  }
  const double gap = model.constants().launch_gap.seconds();
  // Each row's time is a sum over its passes of (work / its constant) + overhead + launch gap.
  const auto predicted = [&](const Row& r) {
    double t = 0.0;
    for (const auto& p : r.passes) t += model.conv_seconds(p, k) + gap;
    return t;
  };
  for (int round = 0; round < 200; ++round) {
    double moved = 0.0;
    for (const Row& r : rows) {
      const double fixed = static_cast<double>(r.passes.size()) * (k.overhead.seconds() + gap);
      if (r.constant == nullptr) {
        const double rest = predicted(r) - fixed;
        const sim::Time o = sim::Time::from_seconds(std::max(0.0, r.measured - rest - static_cast<double>(r.passes.size()) * gap) /
                                          static_cast<double>(r.passes.size()));
        moved = std::max(moved, std::abs((o - k.overhead).seconds()) / r.measured);
        k.overhead = o;
        continue;
      }
      const double ratio = (predicted(r) - fixed) / (r.measured - fixed);
      moved = std::max(moved, std::abs(ratio - 1.0));
      *r.constant *= ratio;
    }
    if (moved < 1e-12) break;
  }
  return k;
}

double fit_fp32_gemm_cap(const KernelSweep& sweep) {
  const KernelCase& row = declared_row(sweep, "GEMM", "gemm_cap_fp32", kFp32GemmCalibration);
  const strategy::ComputeModel model(topo::find_gpu_spec(sweep.gpu));
  const strategy::ComputeConstants& c = model.constants();
  // The model's time at the cap it holds, less the launch gap, scales as 1 / cap.
  const double cap = c.gemm_cap_fp32 > 0.0 ? c.gemm_cap_fp32 : c.gemm_cap;
  const double gap = c.launch_gap.seconds();
  return cap * (model.analytical(row.kernels.front()).seconds() - gap) / (row.measured_s - gap);
}

const std::array<AttentionCalibrationRow, 9> kAttentionCalibration{{
    {"rate", &strategy::FlashAttentionConstants::rate, "attention/bf16/sdpa_fwd/b1h16s16384d128"},
    {"head_extra", &strategy::FlashAttentionConstants::head_extra, "attention/bf16/sdpa_fwd/b1h16s16384d64"},
    {"row_overhead", &strategy::FlashAttentionConstants::row_overhead, "attention/bf16/sdpa_fwd/b128h16s128d128"},
    {"causal_row_overhead", &strategy::FlashAttentionConstants::causal_row_overhead,
     "attention/bf16/sdpa_fwd/b8h16s2048d128/causal#4"},
    {"backward_rate", &strategy::FlashAttentionConstants::backward_rate,
     "attention/bf16/sdpa_fwd_bwd/b1h16s16384d128"},
    {"backward_row_overhead", &strategy::FlashAttentionConstants::backward_row_overhead,
     "attention/bf16/sdpa_fwd_bwd/b128h16s128d128"},
    {"backward_causal_row_overhead", &strategy::FlashAttentionConstants::backward_causal_row_overhead,
     "attention/bf16/sdpa_fwd_bwd/b8h16s2048d128/causal#4"},
    {"cudnn_speedup", &strategy::FlashAttentionConstants::cudnn_speedup, "attention/bf16/sdpa_fwd/b8h16s2048d128#3"},
    {"cudnn_backward_speedup", &strategy::FlashAttentionConstants::cudnn_backward_speedup,
     "attention/bf16/sdpa_fwd_bwd/b8h16s2048d128#3"},
}};

strategy::FlashAttentionConstants fit_attention_constants(const KernelSweep& sweep) {
  const strategy::ComputeModel model(topo::find_gpu_spec(sweep.gpu));
  const double gap = model.constants().launch_gap.seconds();
  struct Row {
    double strategy::FlashAttentionConstants::*member = nullptr;
    const KernelCase* c = nullptr;
  };
  std::vector<Row> rows;
  for (const AttentionCalibrationRow& spec : kAttentionCalibration) {
    rows.push_back({spec.member, &declared_row(sweep, "attention", spec.constant, spec.case_id)});
  }
  // A start the rows then move: FlashAttention-2's published H100 rate, no overheads.
  strategy::FlashAttentionConstants k;
  k.rate = model.constants().attention_cap;
  using K = strategy::FlashAttentionConstants;
  for (int round = 0; round < 1000; ++round) {
    double moved = 0.0;
    for (const Row& r : rows) {
      const sim::OpSignature& fwd = r.c->kernels.front();
      const bool backward = r.c->kernels.size() > 1;
      // The part of the row its constant scales: the forward, or the backward beside the
      // forward as predicted.
      const double measured = r.c->measured_s - static_cast<double>(r.c->kernels.size()) * gap -
                              (backward ? model.attention_seconds(fwd, k) : 0.0);
      const double predicted = model.attention_seconds(backward ? r.c->kernels[1] : fwd, k);
      const double ratio = measured / predicted;  // the row's time, measured over predicted
      const double d = fwd.shape[3];
      const double m = std::ceil(fwd.shape[2] / 128.0);
      const double tiles = fwd.shape[4] != 0 ? (m + 1.0) / 2.0 : m;  // per row block, before its overhead
      double& v = k.*r.member;
      const double before = v;
      if (r.member == &K::rate || r.member == &K::backward_rate || r.member == &K::cudnn_speedup ||
          r.member == &K::cudnn_backward_speedup) {
        v /= ratio;  // time goes as 1 / rate
      } else if (r.member == &K::head_extra) {
        v = (d + v) * ratio - d;  // time goes as d + head_extra
      } else {
        v = (tiles + v) * ratio - tiles;  // time goes as tiles + overhead
      }
      moved = std::max(moved, std::abs(v - before) / std::max(1.0, std::abs(before)));
    }
    if (moved < 1e-13) break;
  }
  return k;
}

}  // namespace foresight::validate
