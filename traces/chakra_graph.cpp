#include "traces/chakra_graph.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <queue>
#include <set>
#include <unordered_map>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "traces/chakra_conventions.hpp"

namespace foresight::trace {
using sim::ConfigError;
using sim::InternalError;
using sim::TraceError;
namespace {

using sim::CollectiveOp;
using sim::Node;
using sim::OpKind;
using namespace chakra_detail;

// Streams of imported ops (ETs of other producers have none).
constexpr sim::StreamId kComputeStream = 1;
constexpr sim::StreamId kCollectiveStream = 2;
constexpr sim::StreamId kSendStream = 3;
constexpr sim::StreamId kRecvStream = 4;


/// The longest duration a node may have: sim::Time's range (9.2e18 ps, common/units.cpp).
constexpr double kMaxMicros = 9.2e12;

/// The decimal number `text` when it is below `limit` (a communicator, send matrix or stream of
/// a Foresight ET); TraceError naming `what` otherwise. std::stoul threw
/// std::invalid_argument on "x", and a communicator named "4000000000000" was allocated (issue 25).
std::size_t index_in(const std::string& text, std::size_t limit, const std::string& what) {
  std::size_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || stop != end || value >= limit) {
    throw TraceError(fmt::format("{}: expected a number below {}, found \"{}\"", what, limit, text));
  }
  return value;
}

template <typename Enum, std::size_t N>
Enum parse_enum(const std::string& text, const std::array<Enum, N>& all, const std::string& where) {
  for (const Enum e : all) {
    if (sim::to_string(e) == text) return e;
  }
  throw TraceError(fmt::format("{}: unknown value \"{}\"", where, text));
}

constexpr std::array kKinds{OpKind::compute, OpKind::collective, OpKind::send, OpKind::recv, OpKind::host, OpKind::sync};
constexpr std::array kPhases{sim::Phase::none,      sim::Phase::forward, sim::Phase::backward, sim::Phase::wgrad,
                             sim::Phase::optimizer, sim::Phase::data,    sim::Phase::other};
constexpr std::array kAlgorithms{sim::Algorithm::tree, sim::Algorithm::ring,         sim::Algorithm::nvls, sim::Algorithm::nvls_tree,
                                 sim::Algorithm::pat,  sim::Algorithm::hierarchical, sim::Algorithm::direct};

/// Attribute access for one node, recording which attributes were read.
class Attrs {
 public:
  Attrs(const ChakraNode& n, const std::string& origin) : n_(n), origin_(origin), used_(n.attrs.size(), 0) {}
  const ChakraAttr* find(std::string_view name) {
    for (std::size_t i = 0; i < n_.attrs.size(); ++i) {
      if (n_.attrs[i].name == name) {
        used_[i] = 1;
        return &n_.attrs[i];
      }
    }
    return nullptr;
  }
  std::optional<std::int64_t> integer(std::string_view name) {
    const ChakraAttr* a = find(name);
    if (a == nullptr) return std::nullopt;
    return chakra_integer(*a, origin_, n_.id);
  }
  std::int64_t integer_or(std::string_view name, std::int64_t fallback) { return integer(name).value_or(fallback); }
  /// An integer attribute that must lie in [lo, hi] (`fallback` when absent).
  std::int64_t bounded(std::string_view name, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
    const std::int64_t v = integer_or(name, fallback);
    if (v < lo || v > hi) {
      throw TraceError(fmt::format("{}: node {} (\"{}\"): attribute \"{}\": expected {} to {}, found {}", origin_, n_.id,
                                   n_.name, name, lo, hi, v));
    }
    return v;
  }
  /// A real attribute that must be finite and at least 0 (`fallback` when absent).
  double non_negative(std::string_view name, double fallback) {
    const double v = real(name, fallback);
    if (!(v >= 0.0) || !std::isfinite(v)) {
      throw TraceError(fmt::format("{}: node {} (\"{}\"): attribute \"{}\": expected a finite number >= 0, found {}",
                                   origin_, n_.id, n_.name, name, v));
    }
    return v;
  }
  std::int64_t required(std::string_view name, std::string_view why) {
    const auto v = integer(name);
    if (!v) throw TraceError(fmt::format("{}: node {} (\"{}\"): expected attribute {} ({}), found none", origin_, n_.id, n_.name, name, why));
    return *v;
  }
  std::string text(std::string_view name) {
    const ChakraAttr* a = find(name);
    if (a == nullptr) return {};
    if (const auto* s = std::get_if<std::string>(&a->value)) return *s;
    if (const auto* i = std::get_if<std::int64_t>(&a->value)) return std::to_string(*i);
    throw TraceError(fmt::format("{}: node {}: attribute \"{}\": expected a string, found another type", origin_, n_.id, name));
  }
  double real(std::string_view name, double fallback) {
    const ChakraAttr* a = find(name);
    if (a == nullptr) return fallback;
    if (const auto* d = std::get_if<double>(&a->value)) return *d;
    return static_cast<double>(chakra_integer(*a, origin_, n_.id));
  }
  template <typename T>
  const T* list(std::string_view name) {
    const ChakraAttr* a = find(name);
    if (a == nullptr) return nullptr;
    const T* v = std::get_if<T>(&a->value);
    if (v == nullptr) throw TraceError(fmt::format("{}: node {}: attribute \"{}\": expected a list, found another type", origin_, n_.id, name));
    return v;
  }
  void report_unused(std::map<std::string, std::size_t>& unused) const {
    for (std::size_t i = 0; i < n_.attrs.size(); ++i) {
      if (!used_[i]) ++unused[n_.attrs[i].name];
    }
  }

 private:
  const ChakraNode& n_;
  const std::string& origin_;
  std::vector<std::uint8_t> used_;
};

std::int64_t metadata_integer(const ChakraTrace& t, std::string_view name) {
  const ChakraAttr* a = t.metadata_attr(name);
  if (a == nullptr) throw TraceError(fmt::format("{}: expected metadata attribute {} in a Foresight ET, found none", t.path, name));
  return chakra_integer(*a, t.path, 0);
}

std::string metadata_text(const ChakraTrace& t, std::string_view name) {
  const ChakraAttr* a = t.metadata_attr(name);
  if (a == nullptr) return {};
  if (const auto* s = std::get_if<std::string>(&a->value)) return *s;
  throw TraceError(fmt::format("{}: metadata attribute {}: expected a string, found another type", t.path, name));
}

bool written_by_foresight(const ChakraTrace& t) {
  return metadata_text(t, "producer").rfind(kProducer, 0) == 0 && t.metadata_attr("foresight.rank") != nullptr;
}

/// Per rank: node positions in an order where every node comes after its dependencies (file
/// order where the file already is one).
std::vector<std::size_t> topological(const ChakraTrace& t, const std::unordered_map<std::uint64_t, std::size_t>& index,
                                     bool with_ctrl) {
  const std::size_t n = t.nodes.size();
  std::vector<std::vector<std::size_t>> children(n);
  std::vector<std::size_t> waiting(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    std::set<std::size_t> parents;
    const auto add = [&](const std::vector<std::uint64_t>& deps, std::string_view kind) {
      for (const std::uint64_t d : deps) {
        const auto it = index.find(d);
        if (it == index.end()) {
          throw TraceError(fmt::format("{}: node {} (\"{}\"): {} names node {}, which the file lacks", t.path, t.nodes[i].id,
                                       t.nodes[i].name, kind, d));
        }
        if (it->second == i) throw TraceError(fmt::format("{}: node {}: depends on itself", t.path, t.nodes[i].id));
        parents.insert(it->second);
      }
    };
    add(t.nodes[i].data_deps, "data_deps");
    if (with_ctrl) add(t.nodes[i].ctrl_deps, "ctrl_deps");
    for (const std::size_t p : parents) children[p].push_back(i);
    waiting[i] = parents.size();
  }
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i) {
    if (waiting[i] == 0) ready.push(i);
  }
  std::vector<std::size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    const std::size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (const std::size_t c : children[i]) {
      if (--waiting[c] == 0) ready.push(c);
    }
  }
  if (order.size() != n) {
    for (std::size_t i = 0; i < n; ++i) {
      if (waiting[i] > 0) {
        throw TraceError(fmt::format("{}: node {} (\"{}\") is part of a dependency cycle ({} nodes never become ready)", t.path,
                                     t.nodes[i].id, t.nodes[i].name, n - order.size()));
      }
    }
  }
  return order;
}

void record_schedule(const ChakraTrace& t, bool every_node, std::optional<double>& first_us, std::optional<double>& last_us) {
  for (const ChakraNode& n : t.nodes) {
    if (!every_node && n.start_time_micros == 0 && n.duration_micros == 0) continue;
    const double s = static_cast<double>(n.start_time_micros);
    first_us = first_us ? std::min(*first_us, s) : s;
    last_us = last_us ? std::max(*last_us, s + static_cast<double>(n.duration_micros)) : s + static_cast<double>(n.duration_micros);
  }
}

/// The longest op a Foresight ET may hold: 10^6 s, so that sums of many stay within sim::Time.
constexpr std::int64_t kMaxOpPs = 1'000'000'000'000'000'000;
constexpr std::int64_t kMaxU32 = std::numeric_limits<std::uint32_t>::max();
constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();

sim::Time time_ps(Attrs& a, std::string_view name) { return sim::Time::from_ps(a.bounded(name, 0, 0, kMaxOpPs)); }

/// A Foresight ET back into its graph: every node where it stood, with every field.
void import_foresight(const std::vector<ChakraTrace>& ranks, const ChakraImportOptions& options, ChakraGraph& out) {
  sim::ExecutionGraph& g = out.graph;
  const ChakraTrace& first = ranks.front();
  out.foresight = true;
  out.producer = metadata_text(first, "producer");
  out.network = metadata_text(first, "foresight.network");
  out.cluster = metadata_text(first, "foresight.cluster");
  if (first.metadata_attr("foresight.cluster_gpus") != nullptr) {
    out.cluster_gpus = static_cast<int>(metadata_integer(first, "foresight.cluster_gpus"));
  }
  if (const ChakraAttr* s = first.metadata_attr("foresight.comm_compute_slowdown")) {
    if (const auto* d = std::get_if<double>(&s->value)) out.comm_compute_slowdown = *d;
  }
  // Each rank's ET records its GPU's factors: one set for all, or one per rank where they differ.
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const ChakraTrace& t = ranks[r];
    std::array<double, sim::kOpTypeCount> slow{};
    std::array<bool, sim::kOpTypeCount> waits{};
    for (int k = 0; k < sim::kOpTypeCount; ++k) {
      const std::string key = comm_slowdown_key(static_cast<sim::OpType>(k));
      if (const ChakraAttr* s = t.metadata_attr(key)) {
        const auto* d = std::get_if<double>(&s->value);
        if (d == nullptr || !(*d >= 0.0) || !std::isfinite(*d)) {
          throw TraceError(fmt::format("{}: metadata {}: expected a factor >= 0", t.path, key));
        }
        slow[static_cast<std::size_t>(k)] = *d;
      }
      const std::string wkey = comm_waits_key(static_cast<sim::OpType>(k));
      if (const ChakraAttr* w = t.metadata_attr(wkey)) {
        const auto* b = std::get_if<bool>(&w->value);
        if (b == nullptr) throw TraceError(fmt::format("{}: metadata {}: expected a boolean", t.path, wkey));
        waits[static_cast<std::size_t>(k)] = *b;
      }
    }
    out.comm_compute_slowdown_by_rank.push_back(slow);
    out.comm_waits_for_by_rank.push_back(waits);
  }
  out.comm_compute_slowdown_by_type = out.comm_compute_slowdown_by_rank.front();
  out.comm_waits_for = out.comm_waits_for_by_rank.front();
  const auto same = [](const auto& v) { return std::all_of(v.begin(), v.end(), [&](const auto& x) { return x == v.front(); }); };
  if (same(out.comm_compute_slowdown_by_rank) && same(out.comm_waits_for_by_rank)) {
    out.comm_compute_slowdown_by_rank.clear();
    out.comm_waits_for_by_rank.clear();
  }
  // Where each (rank, id) lands: nodes are placed by their recorded global order.
  struct Placed {
    std::int64_t order;
    std::size_t rank;
    std::size_t index;
  };
  std::vector<Placed> placed;
  bool process_known = true;
  // Each send matrix is written by every rank that uses it: their indices are below this count.
  std::size_t matrix_count = 0;
  for (const ChakraTrace& t : ranks) {
    for (const ChakraAttr& a : t.metadata) matrix_count += a.name.rfind("foresight.send_matrix.", 0) == 0 ? 1 : 0;
  }
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const ChakraTrace& t = ranks[r];
    if (metadata_integer(t, "foresight.rank") != static_cast<std::int64_t>(r)) {
      throw TraceError(fmt::format("{}: expected rank {} (its file name), found foresight.rank {}", t.path, r,
                                   metadata_integer(t, "foresight.rank")));
    }
    // A host thread drives one rank or more: fewer hosts than ranks (a host of 2^32 - 1 sized
    // host_process past memory: issue 25).
    const std::int64_t host = metadata_integer(t, "foresight.host");
    if (host < 0 || static_cast<std::size_t>(host) >= ranks.size()) {
      throw TraceError(fmt::format("{}: metadata foresight.host: expected a host thread 0-{}, found {}", t.path,
                                   ranks.size() - 1, host));
    }
    g.add_rank(static_cast<sim::GpuId>(metadata_integer(t, "foresight.gpu")), static_cast<std::uint32_t>(host));
    const ChakraAttr* p = t.metadata_attr("foresight.process");
    process_known = process_known && p != nullptr;
    if (p != nullptr) {
      const auto host = static_cast<std::size_t>(g.rank_host.back());
      if (g.host_process.size() <= host) g.host_process.resize(host + 1, 0);
      g.host_process[host] = static_cast<std::uint32_t>(chakra_integer(*p, t.path, 0));
    }
    if (const auto* names = t.metadata_attr("foresight.stream_names")) {
      if (const auto* list = std::get_if<std::vector<std::string>>(&names->value)) {
        for (const std::string& s : *list) {
          const auto eq = s.find('=');
          if (eq == std::string::npos) continue;
          const std::size_t stream = index_in(s.substr(0, eq), std::numeric_limits<sim::StreamId>::max(),
                                              fmt::format("{}: metadata foresight.stream_names", t.path));
          g.stream_names[static_cast<sim::StreamId>(stream)] = s.substr(eq + 1);
        }
      }
    }
    for (const ChakraAttr& a : t.metadata) {
      if (a.name.rfind("foresight.send_matrix.", 0) != 0) continue;
      const std::size_t k = index_in(a.name.substr(22), matrix_count, fmt::format("{}: metadata {}", t.path, a.name));
      const auto* v = std::get_if<std::vector<double>>(&a.value);
      if (v == nullptr) throw TraceError(fmt::format("{}: metadata {}: expected a list of numbers", t.path, a.name));
      if (g.send_matrices.size() <= k) g.send_matrices.resize(k + 1);
      g.send_matrices[k] = *v;
    }
    for (std::size_t i = 0; i < t.nodes.size(); ++i) {
      const ChakraAttr* o = t.nodes[i].attr("foresight.order");
      if (o == nullptr) throw TraceError(fmt::format("{}: node {}: expected attribute foresight.order in a Foresight ET", t.path, t.nodes[i].id));
      placed.push_back({chakra_integer(*o, t.path, t.nodes[i].id), r, i});
    }
  }
  if (!process_known) g.host_process.clear();
  std::sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) { return a.order < b.order; });
  // Global ids by (rank, local id).
  std::vector<std::unordered_map<std::uint64_t, sim::NodeId>> global(ranks.size());
  for (std::size_t k = 0; k < placed.size(); ++k) {
    if (k > 0 && placed[k].order == placed[k - 1].order) {
      throw TraceError(fmt::format("{}: two nodes share foresight.order {}", ranks[placed[k].rank].path, placed[k].order));
    }
    global[placed[k].rank][ranks[placed[k].rank].nodes[placed[k].index].id] = static_cast<sim::NodeId>(k);
  }
  // Communicators, by index, from the groups.
  if (options.groups != nullptr) {
    for (const auto& [name, members] : *options.groups) {
      // The export names communicators 0 .. N-1.
      const std::size_t k = index_in(name, options.groups->size(), fmt::format("comm group \"{}\"", name));
      if (g.communicators.size() <= k) g.communicators.resize(k + 1);
      for (const int m : members) g.communicators[k].ranks.push_back(static_cast<sim::RankId>(m));
    }
  }
  for (const Placed& p : placed) {
    const ChakraTrace& t = ranks[p.rank];
    const ChakraNode& c = t.nodes[p.index];
    Attrs a(c, t.path);
    Node n;
    n.rank = static_cast<sim::RankId>(p.rank);
    n.kind = parse_enum(a.text("foresight.kind"), kKinds, fmt::format("{}: node {}: foresight.kind", t.path, c.id));
    n.stream = static_cast<sim::StreamId>(a.bounded("foresight.stream", 1, 0, kMaxU32));
    n.duration = time_ps(a, "foresight.duration_ps");
    n.dispatch = time_ps(a, "foresight.dispatch_ps");
    n.gil = time_ps(a, "foresight.gil_ps");
    n.bytes = a.non_negative("foresight.bytes", 0.0);
    n.phase = parse_enum(a.text("foresight.phase").empty() ? std::string("none") : a.text("foresight.phase"), kPhases,
                         fmt::format("{}: node {}: foresight.phase", t.path, c.id));
    n.layer = static_cast<int>(a.bounded("foresight.layer", -1, -1, kMaxInt));
    n.micro_batch = static_cast<int>(a.bounded("foresight.micro_batch", -1, -1, kMaxInt));
    if (const std::string alg = a.text("foresight.algorithm"); !alg.empty()) {
      n.algorithm = parse_enum(alg, kAlgorithms, fmt::format("{}: node {}: foresight.algorithm", t.path, c.id));
    }
    n.name = g.intern(c.name);
    if (const std::string family = a.text("foresight.kernel_family"); !family.empty()) {
      // The family alone: what the executor needs to slow the kernel while its rank communicates.
      sim::OpSignature sig;
      sig.type = sim::parse_op_type(family, fmt::format("{}: node {}: foresight.kernel_family", t.path, c.id));
      sig.kernel = family;  // the interning key: one signature per family
      n.signature = g.add_signature(sig);
    }
    a.find("is_cpu_op");
    if (n.kind == OpKind::collective) {
      const std::string pg = a.text("pg_name");
      n.communicator = static_cast<std::uint32_t>(index_in(
          pg.empty() ? std::string("0") : pg, g.communicators.size(),
          fmt::format("{}: node {}: pg_name \"{}\", a communicator of the comm-group file", t.path, c.id, pg)));
      const auto op = from_chakra_op(a.required("comm_type", "the collective"));
      if (!op) throw TraceError(fmt::format("{}: node {}: comm_type names no collective Foresight models", t.path, c.id));
      n.op = *op;
      a.integer("comm_size");
      n.root = static_cast<int>(a.bounded("foresight.root", 0, 0, kMaxInt));
      n.matrix = static_cast<std::uint32_t>(a.bounded("foresight.matrix", sim::kNoMatrix, 0, kMaxU32));
    } else if (n.kind == OpKind::send || n.kind == OpKind::recv) {
      a.required(n.kind == OpKind::send ? "comm_dst" : "comm_src", "the peer");
      n.peer = static_cast<sim::RankId>(a.bounded(n.kind == OpKind::send ? "comm_dst" : "comm_src", 0, 0,
                                                  static_cast<std::int64_t>(ranks.size()) - 1));
      a.integer(n.kind == OpKind::send ? "comm_src" : "comm_dst");
      n.tag = static_cast<std::uint32_t>(a.bounded("comm_tag", 0, 0, kMaxU32));
      a.integer("comm_size");
    }
    for (const std::uint64_t d : c.data_deps) {
      const auto it = global[p.rank].find(d);
      if (it == global[p.rank].end()) throw TraceError(fmt::format("{}: node {}: data_deps names node {}, which the file lacks", t.path, c.id, d));
      n.deps.push_back(it->second);
    }
    if (const auto* remote = a.list<std::vector<std::int64_t>>("foresight.remote_deps")) {
      for (std::size_t i = 0; i + 1 < remote->size(); i += 2) {
        const auto rr = static_cast<std::size_t>((*remote)[i]);
        const auto it = rr < global.size() ? global[rr].find(static_cast<std::uint64_t>((*remote)[i + 1])) : global[0].end();
        if (rr >= global.size() || it == global[rr].end()) {
          throw TraceError(fmt::format("{}: node {}: foresight.remote_deps names a node no rank has", t.path, c.id));
        }
        n.deps.push_back(it->second);
      }
    }
    a.find("foresight.order");
    a.report_unused(out.unused_attrs);
    g.add(std::move(n));
  }
}

/// ETs of any producer, by Chakra's own fields and conventions.
void import_generic(const std::vector<ChakraTrace>& ranks, const ChakraImportOptions& options, ChakraGraph& out) {
  sim::ExecutionGraph& g = out.graph;
  const std::size_t n_ranks = ranks.size();
  for (std::size_t r = 0; r < n_ranks; ++r) g.add_rank(static_cast<sim::GpuId>(r), static_cast<std::uint32_t>(r));
  g.stream_names = {{sim::kHostStream, "host"}, {kComputeStream, "compute"}, {kCollectiveStream, "collectives"},
                    {kSendStream, "sends"}, {kRecvStream, "receives"}};
  std::map<std::string, std::uint32_t> communicator_of;  // by pg_name ("" = every rank)
  const auto communicator = [&](const std::string& pg, const ChakraTrace& t, const ChakraNode& c) {
    const auto it = communicator_of.find(pg);
    if (it != communicator_of.end()) return it->second;
    std::vector<sim::RankId> members;
    if (pg.empty()) {
      for (std::size_t r = 0; r < n_ranks; ++r) members.push_back(static_cast<sim::RankId>(r));
    } else {
      const auto group = options.groups != nullptr ? options.groups->find(pg) : ChakraGroups::const_iterator{};
      if (options.groups == nullptr || group == options.groups->end()) {
        throw TraceError(fmt::format("{}: node {} (\"{}\"): pg_name \"{}\" is in no comm-group file (give one with "
                                     "--comm-groups)",
                                     t.path, c.id, c.name, pg));
      }
      for (const int m : group->second) {
        if (m < 0 || static_cast<std::size_t>(m) >= n_ranks) {
          throw TraceError(fmt::format("comm group \"{}\": expected ranks 0-{}, found {}", pg, n_ranks - 1, m));
        }
        members.push_back(static_cast<sim::RankId>(m));
      }
    }
    const std::uint32_t id = g.add_communicator(std::move(members));
    communicator_of.emplace(pg, id);
    return id;
  };
  for (std::size_t r = 0; r < n_ranks; ++r) {
    const ChakraTrace& t = ranks[r];
    std::unordered_map<std::uint64_t, std::size_t> index;
    for (std::size_t i = 0; i < t.nodes.size(); ++i) {
      if (!index.emplace(t.nodes[i].id, i).second) throw TraceError(fmt::format("{}: two nodes share id {}", t.path, t.nodes[i].id));
    }
    const std::vector<std::size_t> order = topological(t, index, true);
    std::unordered_map<std::uint64_t, sim::NodeId> global;
    for (const std::size_t i : order) {
      const ChakraNode& c = t.nodes[i];
      Attrs a(c, t.path);
      Node n;
      n.rank = static_cast<sim::RankId>(r);
      n.name = g.intern(c.name);
      const bool cpu = a.integer_or("is_cpu_op", 0) != 0;
      switch (c.type) {
        case ChakraNodeType::comp: {
          n.kind = cpu ? OpKind::host : OpKind::compute;
          n.stream = cpu ? sim::kHostStream : kComputeStream;
          double us = static_cast<double>(c.duration_micros);
          const auto ops = a.integer("num_ops");
          const auto bytes = a.integer("tensor_size");
          if (us == 0.0 && !cpu && (ops.value_or(0) > 0 || bytes.value_or(0) > 0) && options.peak_flops > 0.0) {
            us = std::max(static_cast<double>(ops.value_or(0)) / options.peak_flops,
                          static_cast<double>(bytes.value_or(0)) / options.memory_bandwidth) * 1e6;
            ++out.roofline;
          }
          if (!(us < kMaxMicros)) {  // Time::from_seconds threw InternalError (issue 25)
            throw TraceError(fmt::format("{}: node {} (\"{}\"): expected a duration below {} us (sim::Time's range), found {} us",
                                         t.path, c.id, c.name, kMaxMicros, us));
          }
          n.duration = sim::Time::from_seconds(us * 1e-6);
          ++(cpu ? out.host : out.compute);
          break;
        }
        case ChakraNodeType::metadata:
        case ChakraNodeType::invalid:
          n.kind = OpKind::sync;
          n.stream = sim::kHostStream;
          ++out.markers;
          break;
        case ChakraNodeType::comm_coll: {
          n.kind = OpKind::collective;
          n.stream = kCollectiveStream;
          const std::int64_t type = a.required("comm_type", "which collective");
          const auto op = from_chakra_op(type);
          if (!op) {
            throw TraceError(fmt::format("{}: node {} (\"{}\"): comm_type {} (gather, scatter or barrier) is not an NCCL collective "
                                         "Foresight models",
                                         t.path, c.id, c.name, type));
          }
          n.op = *op;
          n.communicator = communicator(a.text("pg_name"), t, c);
          const std::int64_t size = a.required("comm_size", "its bytes");
          if (size < 0) throw TraceError(fmt::format("{}: node {}: comm_size: expected at least 0, found {}", t.path, c.id, size));
          const std::size_t members = g.communicators[n.communicator].ranks.size();
          n.bytes = static_cast<double>(size) * (per_rank_size(n.op) ? static_cast<double>(members) : 1.0);
          a.find("involved_dim");
          a.find("comm_priority");
          ++out.collectives;
          break;
        }
        case ChakraNodeType::comm_send:
        case ChakraNodeType::comm_recv: {
          const bool send = c.type == ChakraNodeType::comm_send;
          n.kind = send ? OpKind::send : OpKind::recv;
          n.stream = send ? kSendStream : kRecvStream;
          const std::int64_t peer = a.required(send ? "comm_dst" : "comm_src", send ? "the receiving rank" : "the sending rank");
          const std::int64_t self = a.integer_or(send ? "comm_src" : "comm_dst", static_cast<std::int64_t>(r));
          if (peer < 0 || static_cast<std::size_t>(peer) >= n_ranks || peer == static_cast<std::int64_t>(r) ||
              self != static_cast<std::int64_t>(r)) {
            throw TraceError(fmt::format("{}: node {} (\"{}\"): expected a transfer between this rank ({}) and another of 0-{}, found "
                                         "comm_src/comm_dst {} and {}",
                                         t.path, c.id, c.name, r, n_ranks - 1, send ? self : peer, send ? peer : self));
          }
          n.peer = static_cast<sim::RankId>(peer);
          n.tag = static_cast<std::uint32_t>(a.bounded("comm_tag", 0, 0, kMaxU32));
          const std::int64_t size = a.required("comm_size", "its bytes");
          if (size < 0) throw TraceError(fmt::format("{}: node {}: comm_size: expected at least 0, found {}", t.path, c.id, size));
          n.bytes = static_cast<double>(size);
          ++out.transfers;
          break;
        }
        case ChakraNodeType::mem_load:
        case ChakraNodeType::mem_store:
          throw TraceError(fmt::format("{}: node {} (\"{}\"): {} (remote memory) is not supported", t.path, c.id, c.name,
                                       to_string(c.type)));
      }
      std::set<sim::NodeId> deps;
      for (const auto* list : {&c.data_deps, &c.ctrl_deps}) {
        for (const std::uint64_t d : *list) deps.insert(global.at(d));
      }
      for (const sim::NodeId d : deps) n.deps.push_back(d);
      a.report_unused(out.unused_attrs);
      global[c.id] = g.add(std::move(n));
    }
  }
}

}  // namespace

ChakraGraph chakra_graph(const std::vector<ChakraTrace>& ranks, const ChakraImportOptions& options) {
  if (ranks.empty()) throw TraceError("chakra: expected at least one rank's ET, found none");
  ChakraGraph out;
  const bool ours = std::all_of(ranks.begin(), ranks.end(), written_by_foresight);
  if (ours) {
    import_foresight(ranks, options, out);
    for (const Node& n : out.graph.nodes) {
      switch (n.kind) {
        case OpKind::compute: ++out.compute; break;
        case OpKind::host: ++out.host; break;
        case OpKind::collective: ++out.collectives; break;
        case OpKind::send:
        case OpKind::recv: ++out.transfers; break;
        case OpKind::sync: ++out.markers; break;
      }
    }
  } else {
    import_generic(ranks, options, out);
  }
  std::optional<double> first_us, last_us;
  for (const ChakraTrace& t : ranks) record_schedule(t, ours, first_us, last_us);
  if (first_us && last_us && *last_us > *first_us) out.recorded_s = (*last_us - *first_us) * 1e-6;
  return out;
}

double replayed_span(const ChakraGraph& g, const sim::ExecutionResult& result) {
  std::optional<std::uint64_t> first, last;
  for (std::size_t i = 0; i < g.graph.nodes.size(); ++i) {
    const std::uint64_t s = micros(result.start[i]);
    const std::uint64_t e = micros(result.end[i]);
    if (!g.foresight && s == 0 && e == 0) continue;
    first = first ? std::min(*first, s) : s;
    last = last ? std::max(*last, e) : e;  // start + duration, as the export writes them
  }
  return first && last && *last > *first ? static_cast<double>(*last - *first) * 1e-6 : 0.0;
}

}  // namespace foresight::trace
