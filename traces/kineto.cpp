#include "traces/kineto.hpp"

#include <fmt/core.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.hpp"
#include "common/json_reader.hpp"

namespace foresight::trace {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw sim::TraceError(fmt::format("{}: {}", origin, what));
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The largest trace text read (decompressed): 4 GiB, far above any step's trace; a device such
/// as /dev/zero, or a gzip bomb, would otherwise be read until memory runs out.
constexpr std::size_t kMaxTraceBytes = std::size_t{4} << 30;

/// The bytes of a regular file of at most kMaxTraceBytes.
std::string read_bytes(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    fail(path, "expected a regular file, found a device, folder or other special file");
  }
  if (const auto size = std::filesystem::file_size(path, ec); !ec && size > kMaxTraceBytes) {
    fail(path, fmt::format("expected at most {} bytes of trace text, found {}", kMaxTraceBytes, size));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot be opened");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string read_gzip(const std::string& path) { return gunzip(read_bytes(path), path, kMaxTraceBytes); }

std::string read_text(const std::string& path) {
  return ends_with(path, ".gz") ? read_gzip(path) : read_bytes(path);
}

/// `obj[key]` when it is a string, else `fallback` (json::value would throw nlohmann's
/// type_error for a key of another type: a fuzz finding).
std::string string_or(const json& obj, const char* key, const std::string& fallback) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : fallback;
}

double number(const json& e, const char* key, std::size_t index, const std::string& origin) {
  const auto it = e.find(key);
  if (it == e.end() || !it->is_number()) {
    fail(origin, fmt::format("/traceEvents/{} ({}): expected a number \"{}\"", index,
                             string_or(e, "name", "unnamed"), key));
  }
  return it->get<double>();
}

std::int64_t integer_or(const json& obj, const char* key, std::int64_t fallback) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_number_integer() ? it->get<std::int64_t>() : fallback;
}

/// A thread or stream id: Kineto writes integers, sometimes strings ("stream 7").
std::int64_t id_of(const json& v) {
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    const auto digits = s.find_first_of("-0123456789");
    if (digits != std::string::npos) return std::strtoll(s.c_str() + digits, nullptr, 10);
  }
  return 0;
}

/// The product of a kernel's "grid" or "block" dimensions ([x, y, z] of positive integers); 0
/// when the trace did not record it. TraceError for one that is not such a list.
std::int64_t dims_product(const json& args, const char* key, std::size_t index, const std::string& origin) {
  const auto it = args.find(key);
  if (it == args.end()) return 0;
  std::int64_t product = 1;
  bool ok = it->is_array() && !it->empty() && it->size() <= 3;
  for (const json& d : ok ? *it : json::array()) {
    ok = ok && d.is_number_integer() && d.get<std::int64_t>() > 0;
    if (ok) product *= d.get<std::int64_t>();
  }
  if (!ok) fail(origin, fmt::format("/traceEvents/{}/args/{}: expected [x, y, z] of positive integers, found {}", index, key, it->dump()));
  return product;
}

/// The collective of an NCCL kernel's name (ncclKernel_AllReduce_RING_LL_Sum_float,
/// ncclDevKernel_SendRecv, ...), lower case; empty when it is not an NCCL kernel.
std::string nccl_collective(const std::string& name) {
  for (const std::string_view prefix : {"ncclKernel_", "ncclDevKernel_"}) {
    const auto at = name.find(prefix);
    if (at == std::string::npos) continue;
    const auto start = at + prefix.size();
    const auto end = name.find_first_of("_(", start);
    std::string c = name.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return c;
  }
  return {};
}

}  // namespace

const KinetoStep& KinetoTrace::step_at(int index) const {
  if (steps.empty()) throw sim::TraceError(fmt::format("{}: no ProfilerStep#N annotation to replay", path));
  const int n = static_cast<int>(steps.size());
  if (index < 0) index += n;
  if (index < 0 || index >= n) {
    throw sim::TraceError(fmt::format("{}: step index {} is outside the trace's {} steps", path, index, n));
  }
  return steps[static_cast<std::size_t>(index)];
}

std::vector<const KinetoGpuOp*> KinetoTrace::gpu_ops_in(const KinetoStep& s) const {
  std::vector<const KinetoGpuOp*> out;
  for (const KinetoGpuOp& op : gpu_ops) {
    if (op.ts_us >= s.ts_us && op.ts_us < s.ts_us + s.dur_us) out.push_back(&op);
  }
  return out;
}

KinetoTrace parse_kineto(const std::string& text, const std::string& origin) {
  // The shared reader: syntax errors with their byte, nesting bounded (JsonReader::kMaxDepth).
  const json doc = topo::JsonReader(origin, sim::ErrorKind::trace).parse(text);
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    fail(origin, "expected a Kineto trace: an object with a \"traceEvents\" list");
  }
  KinetoTrace t;
  t.path = origin;
  if (const auto it = doc.find("deviceProperties"); it != doc.end() && it->is_array() && !it->empty()) {
    const json& d = it->front();
    if (d.contains("name") && d["name"].is_string()) t.gpu_name = d["name"].get<std::string>();
    t.sm_count = static_cast<int>(integer_or(d, "numSms", 0));
  }
  if (const auto it = doc.find("distributedInfo"); it != doc.end() && it->is_object()) {
    t.rank = static_cast<int>(integer_or(*it, "rank", -1));
    t.world_size = static_cast<int>(integer_or(*it, "world_size", 0));
  }
  const json& events = doc["traceEvents"];
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (!e.is_object() || string_or(e, "ph", "") != "X") continue;
    const std::string cat = string_or(e, "cat", "");
    const std::string name = string_or(e, "name", "");
    static const json kEmpty = json::object();
    const json& args = e.contains("args") && e["args"].is_object() ? e["args"] : kEmpty;
    if (name.rfind("ProfilerStep#", 0) == 0) {
      // PyTorch's profiler also writes each step's range as the GPU saw it ("gpu_user_annotation",
      // from its first to its last GPU op): the step is the host's range, so the mirror is skipped.
      if (cat == "gpu_user_annotation") continue;
      KinetoStep s;
      try {
        s.number = std::stoi(name.substr(13));
      } catch (const std::exception&) {
        fail(origin, fmt::format("/traceEvents/{}: expected ProfilerStep#<number>, found \"{}\"", i, name));
      }
      s.ts_us = number(e, "ts", i, origin);
      s.dur_us = number(e, "dur", i, origin);
      t.steps.push_back(s);
      continue;
    }
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") {
      KinetoGpuOp op;
      op.kind = cat == "kernel" ? KinetoGpuOp::Kind::kernel
                : cat == "gpu_memcpy" ? KinetoGpuOp::Kind::memcpy : KinetoGpuOp::Kind::memset;
      op.name = name;
      op.ts_us = number(e, "ts", i, origin);
      op.dur_us = number(e, "dur", i, origin);
      op.device = static_cast<int>(integer_or(args, "device", id_of(e.value("pid", json(0)))));
      op.stream = args.contains("stream") ? id_of(args["stream"]) : id_of(e.value("tid", json(0)));
      op.correlation = integer_or(args, "correlation", -1);
      if (op.kind == KinetoGpuOp::Kind::kernel) {
        op.collective = nccl_collective(name);
        if (const auto c = args.find("Collective name"); c != args.end() && c->is_string()) op.collective = c->get<std::string>();
        if (const auto n = args.find("In msg nelems"); n != args.end() && n->is_number()) op.message_elems = n->get<double>();
        if (const auto d = args.find("dtype"); d != args.end() && d->is_string()) op.dtype = d->get<std::string>();
        op.group_size = static_cast<int>(integer_or(args, "Group size", 0));
        op.blocks = dims_product(args, "grid", i, origin);
        op.threads_per_block = static_cast<int>(dims_product(args, "block", i, origin));
        op.registers_per_thread = static_cast<int>(integer_or(args, "registers per thread", 0));
        op.shared_bytes = integer_or(args, "shared memory", 0);
      }
      t.gpu_ops.push_back(std::move(op));
    } else if (cat == "cuda_runtime" || cat == "cuda_driver") {
      KinetoRuntimeCall r;
      r.name = name;
      r.tid = id_of(e.value("tid", json(0)));
      r.ts_us = number(e, "ts", i, origin);
      r.dur_us = number(e, "dur", i, origin);
      r.correlation = integer_or(args, "correlation", -1);
      t.runtime.push_back(std::move(r));
    } else if (cat == "cpu_op") {
      KinetoCpuOp c;
      c.name = name;
      c.tid = id_of(e.value("tid", json(0)));
      c.ts_us = number(e, "ts", i, origin);
      c.dur_us = number(e, "dur", i, origin);
      c.external_id = integer_or(args, "External id", -1);
      if (const auto d = args.find("Input Dims"); d != args.end() && d->is_array()) {
        for (const json& input : *d) {
          std::vector<std::int64_t> shape;
          if (input.is_array()) {
            for (const json& v : input) shape.push_back(v.is_number_integer() ? v.get<std::int64_t>() : -1);
          }
          c.input_dims.push_back(std::move(shape));
        }
      }
      if (const auto ty = args.find("Input type"); ty != args.end() && ty->is_array()) {
        for (const json& v : *ty) c.input_types.push_back(v.is_string() ? v.get<std::string>() : std::string());
      }
      t.cpu_ops.push_back(std::move(c));
    }
  }
  auto by_start = [](const auto& a, const auto& b) { return a.ts_us < b.ts_us; };
  std::stable_sort(t.gpu_ops.begin(), t.gpu_ops.end(), by_start);
  std::stable_sort(t.runtime.begin(), t.runtime.end(), by_start);
  std::stable_sort(t.cpu_ops.begin(), t.cpu_ops.end(), by_start);
  std::stable_sort(t.steps.begin(), t.steps.end(), by_start);
  return t;
}

std::string read_trace_text(const std::string& path) { return read_text(path); }

KinetoTrace load_kineto(const std::string& path) { return parse_kineto(read_text(path), path); }

std::string gunzip(std::string_view bytes, const std::string& origin, std::size_t max_bytes) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) fail(origin, "cannot start the gzip decoder");
  const std::unique_ptr<z_stream, int (*)(z_streamp)> owner(&z, inflateEnd);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(std::min<std::size_t>(bytes.size(), std::numeric_limits<uInt>::max()));
  std::size_t fed = z.avail_in;
  std::string out;
  char buffer[1 << 16];
  while (true) {
    if (z.avail_in == 0 && fed < bytes.size()) {
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + fed));
      z.avail_in = static_cast<uInt>(std::min<std::size_t>(bytes.size() - fed, std::numeric_limits<uInt>::max()));
      fed += z.avail_in;
    }
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    const int code = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - z.avail_out);
    if (out.size() > max_bytes) fail(origin, fmt::format("expected at most {} bytes of trace text, found more", max_bytes));
    if (code == Z_STREAM_END) {
      // Another gzip member may follow (concatenated files read as one, as gzip -d does);
      // anything else after the last member (tar's zero padding) is ignored, as gzip does.
      const std::size_t pos = fed - z.avail_in;
      if (pos + 1 >= bytes.size() || static_cast<unsigned char>(bytes[pos]) != 0x1f ||
          static_cast<unsigned char>(bytes[pos + 1]) != 0x8b) {
        break;
      }
      if (inflateReset(&z) != Z_OK) fail(origin, "cannot restart the gzip decoder");
      continue;
    }
    if (code == Z_BUF_ERROR && z.avail_in == 0 && fed == bytes.size()) {
      fail(origin, fmt::format("truncated gzip stream after {} bytes of text", out.size()));
    }
    if (code != Z_OK && code != Z_BUF_ERROR) {
      fail(origin, fmt::format("corrupt gzip stream after {} bytes: {}", out.size(), z.msg != nullptr ? z.msg : "bad data"));
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> tar_json_members(std::string_view tar, const std::string& origin) {
  std::vector<std::pair<std::string, std::string>> out;
  // POSIX ustar: 512-byte headers (name at 0, size in octal at 124, type at 156), then the data
  // padded to 512 bytes; two zero blocks end the archive.
  std::size_t at = 0;
  while (at + 512 <= tar.size()) {
    const char* h = tar.data() + at;
    if (h[0] == '\0') break;
    std::string name(h, strnlen(h, 100));
    const std::string prefix(h + 345, strnlen(h + 345, 155));
    if (std::string_view(h + 257, 5) == "ustar" && !prefix.empty()) name = prefix + "/" + name;
    std::size_t size = 0;
    for (int i = 124; i < 136 && h[i] >= '0' && h[i] <= '7'; ++i) size = size * 8 + static_cast<std::size_t>(h[i] - '0');
    const char type = h[156];
    at += 512;
    if (size > tar.size() - at) fail(origin, fmt::format("truncated tar archive: member {} needs {} bytes", name, size));
    const std::string base = name.substr(name.find_last_of('/') + 1);
    if ((type == '0' || type == '\0') && ends_with(name, ".json") && base.rfind("._", 0) != 0) {
      out.emplace_back(name, std::string(tar.substr(at, size)));
    }
    at += (size + 511) / 512 * 512;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> read_tar_gz_json(const std::string& path) {
  return tar_json_members(read_gzip(path), path);
}

std::vector<KinetoTrace> load_kineto_files(const std::string& path) {
  if (!ends_with(path, ".tar.gz") && !ends_with(path, ".tgz")) return {load_kineto(path)};
  std::vector<KinetoTrace> out;
  for (const auto& [member, text] : read_tar_gz_json(path)) out.push_back(parse_kineto(text, path + ":" + member));
  if (out.empty()) fail(path, "the archive holds no .json trace");
  return out;
}

}  // namespace foresight::trace
