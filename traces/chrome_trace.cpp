#include "traces/chrome_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <set>
#include <string_view>

#include "common/error.hpp"

namespace foresight::trace {

namespace {

/// Appends the JSON string literal of `s`: quoted and escaped; invalid UTF-8 becomes U+FFFD.
/// Plain printable ASCII (most names) is only quoted.
void append_quoted(std::string& out, std::string_view s) {
  const bool plain = std::all_of(
      s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
  if (plain) {
    out += '"';
    out += s;
    out += '"';
    return;
  }
  out +=
      nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string quote(std::string_view s) {
  std::string out;
  append_quoted(out, s);
  return out;
}

/// Appends microseconds, written exactly from integer picoseconds: "12.345678".
void append_us(std::string& out, sim::Time t) {
  const std::int64_t ps = t.ps();
  const std::uint64_t magnitude =
      ps < 0 ? static_cast<std::uint64_t>(-(ps + 1)) + 1 : static_cast<std::uint64_t>(ps);
  fmt::format_to(std::back_inserter(out), "{}{}.{:06}", ps < 0 ? "-" : "", magnitude / 1'000'000,
                 magnitude % 1'000'000);
}

/// Appends one JSON object, member by member; closes it when it goes out of scope.
class Object {
 public:
  explicit Object(std::string& out) : out_(out) { out_ += '{'; }
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;
  ~Object() { out_ += '}'; }

  /// "key":json_value, with `json_value` already in JSON syntax.
  Object& raw(std::string_view key, std::string_view json_value) {
    start(key);
    out_ += json_value;
    return *this;
  }
  Object& str(std::string_view key, std::string_view value) {
    start(key);
    append_quoted(out_, value);
    return *this;
  }
  Object& integer(std::string_view key, std::int64_t value) {
    start(key);
    fmt::format_to(std::back_inserter(out_), "{}", value);
    return *this;
  }
  /// A time in microseconds with picosecond precision.
  Object& time(std::string_view key, sim::Time t) {
    start(key);
    append_us(out_, t);
    return *this;
  }
  /// A finite number in its shortest round-trip form; TraceError naming `what` otherwise.
  template <typename What>
  Object& number(std::string_view key, double v, What&& what) {
    if (!std::isfinite(v)) {
      throw sim::TraceError(
          fmt::format("chrome trace: {} is {} (expected a finite number)", what(), v));
    }
    start(key);
    fmt::format_to(std::back_inserter(out_), "{}", v);
    return *this;
  }
  /// A nested object under `key`, open until the returned Object goes out of scope.
  Object object(std::string_view key) {
    start(key);
    return Object(out_);
  }

 private:
  void start(std::string_view key) {
    if (!first_) out_ += ',';
    first_ = false;
    append_quoted(out_, key);
    out_ += ':';
  }

  std::string& out_;
  bool first_ = true;
};

bool is_comm(sim::OpKind k) {
  return k == sim::OpKind::collective || k == sim::OpKind::send || k == sim::OpKind::recv;
}

void check_sizes(const sim::ExecutionGraph& graph, const sim::ExecutionResult& result) {
  const std::size_t n = graph.nodes.size();
  const std::pair<const char*, std::size_t> vectors[] = {
      {"ready", result.ready.size()},
      {"start", result.start.size()},
      {"end", result.end.size()},
      {"comm_instance", result.comm_instance.size()}};
  for (const auto& [name, size] : vectors) {
    if (size != n) {
      throw sim::TraceError(fmt::format(
          "chrome trace: the execution result has {} entries in '{}' but the graph has {} nodes "
          "(was the result computed from another graph?)",
          size, name, n));
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    const sim::Node& node = graph.nodes[i];
    if (node.rank >= graph.ranks()) {
      throw sim::TraceError(
          fmt::format("chrome trace: node {} is on rank {} but the graph has {} ranks", i,
                      node.rank, graph.ranks()));
    }
    if (result.end[i] < result.start[i]) {
      throw sim::TraceError(
          fmt::format("chrome trace: node {} ends at {} ps, before its start at {} ps", i,
                      result.end[i].ps(), result.start[i].ps()));
    }
  }
}

/// Whether node i appears as a slice: everything but zero-duration syncs.
bool shown(const sim::ExecutionGraph& graph, const sim::ExecutionResult& result, std::size_t i) {
  return graph.nodes[i].kind != sim::OpKind::sync || result.end[i] > result.start[i];
}

class TraceWriter {
 public:
  TraceWriter(const sim::ExecutionGraph& graph, const sim::ExecutionResult& result)
      : graph_(graph),
        result_(result),
        quoted_names_(graph.names.size()),
        quoted_keys_(graph.signatures.size()) {}

  void process(std::uint64_t pid, const std::string& name, std::uint64_t sort_index) {
    {
      Object e = event();
      e.str("ph", "M").str("name", "process_name").integer("pid", static_cast<std::int64_t>(pid));
      e.object("args").str("name", name);
    }
    {
      Object e = event();
      e.str("ph", "M")
          .str("name", "process_sort_index")
          .integer("pid", static_cast<std::int64_t>(pid));
      e.object("args").integer("sort_index", static_cast<std::int64_t>(sort_index));
    }
  }

  void thread(std::uint64_t pid, sim::StreamId stream) {
    const auto it = graph_.stream_names.find(stream);
    const std::string name = it != graph_.stream_names.end() && !it->second.empty()
                                 ? it->second
                                 : fmt::format("stream {}", stream);
    const auto tid = static_cast<std::int64_t>(stream) + 1;
    {
      Object e = event();
      e.str("ph", "M")
          .str("name", "thread_name")
          .integer("pid", static_cast<std::int64_t>(pid))
          .integer("tid", tid);
      e.object("args").str("name", name);
    }
    {
      Object e = event();
      e.str("ph", "M")
          .str("name", "thread_sort_index")
          .integer("pid", static_cast<std::int64_t>(pid))
          .integer("tid", tid);
      e.object("args").integer("sort_index", stream);
    }
  }

  void slice(std::size_t i) {
    const sim::Node& node = graph_.nodes[i];
    const std::string_view phase = sim::to_string(node.phase);
    std::string cat(sim::to_string(node.kind));
    if (node.phase != sim::Phase::none) cat += fmt::format(",{}", phase);
    Object e = event();
    e.str("ph", "X").raw("name", name_of(i)).str("cat", cat);
    e.integer("pid", node.rank + 1).integer("tid", static_cast<std::int64_t>(node.stream) + 1);
    e.time("ts", result_.start[i]).time("dur", result_.end[i] - result_.start[i]);
    Object args = e.object("args");
    write_args(args, i);
  }

  /// Binds the members of one collective or transfer, in the order given, with a flow.
  void flow(std::uint32_t instance, const std::vector<sim::NodeId>& members) {
    // One point inside every member's slice when they overlap (they share a start when the
    // executor rendezvouses them), else each slice's middle with the chain in time order.
    sim::Time latest_start = sim::Time::zero();
    sim::Time earliest_end = sim::Time::max();
    for (const sim::NodeId m : members) {
      latest_start = std::max(latest_start, result_.start[m]);
      earliest_end = std::min(earliest_end, result_.end[m]);
    }
    std::vector<std::pair<sim::Time, sim::NodeId>> chain;
    for (const sim::NodeId m : members) {
      const sim::Time at = latest_start < earliest_end
                               ? latest_start + (earliest_end - latest_start) / 2
                               : result_.start[m] + (result_.end[m] - result_.start[m]) / 2;
      chain.emplace_back(at, m);
    }
    std::stable_sort(chain.begin(), chain.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    const sim::Node& first = graph_.nodes[chain.front().second];
    const std::string name(first.kind == sim::OpKind::collective ? sim::to_string(first.op)
                                                                 : "send_recv");
    for (std::size_t k = 0; k < chain.size(); ++k) {
      const sim::Node& node = graph_.nodes[chain[k].second];
      const bool last = k + 1 == chain.size();
      Object e = event();
      e.str("ph", k == 0 ? "s" : (last ? "f" : "t")).str("name", name).str("cat", "comm");
      e.integer("id", instance)
          .integer("pid", node.rank + 1)
          .integer("tid", static_cast<std::int64_t>(node.stream) + 1);
      e.time("ts", chain[k].first);
      if (last) e.str("bp", "e");
    }
  }

  void counter(std::uint64_t pid, const CounterSeries& series) {
    const std::string unit = series.unit.empty() ? std::string("value") : series.unit;
    for (std::size_t k = 0; k < series.points.size(); ++k) {
      const auto& [t, v] = series.points[k];
      Object e = event();
      e.str("ph", "C").str("name", series.name).integer("pid", static_cast<std::int64_t>(pid));
      e.time("ts", t);
      e.object("args").number(unit, v,
                              [&] { return fmt::format("counter '{}' point {}", series.name, k); });
    }
  }

  std::string& out() { return out_; }
  /// Writes what is buffered to `os` once it passes kChunk bytes (or always, with `all`), so a
  /// trace streams out in pieces instead of being held whole. Called between events only.
  void drain(std::ostream& os, bool all) {
    if (!all && out_.size() < kChunk) return;
    os.write(out_.data(), static_cast<std::streamsize>(out_.size()));
    out_.clear();
  }
  static constexpr std::size_t kChunk = std::size_t{1} << 20;

 private:
  Object event() {
    if (events_++ > 0) out_ += ",\n";
    return Object(out_);
  }

  /// The slice's name, quoted: its label, else the kernel (compute), the collective op or the kind.
  /// The slice's name, quoted. A forward or backward op of a micro-batch is prefixed "F<m> " or
  /// "B<m> ", so a pipeline's timeline reads as the familiar schedule diagram.
  const std::string& name_of(std::size_t i) {
    const sim::Node& node = graph_.nodes[i];
    const char tag = node.micro_batch < 0                        ? '\0'
                     : node.phase == sim::Phase::forward         ? 'F'
                     : node.phase == sim::Phase::backward ||
                             node.phase == sim::Phase::wgrad     ? 'B'
                                                                 : '\0';
    std::string_view base;
    if (node.name != 0 && node.name < graph_.names.size() && !graph_.names[node.name].empty()) {
      if (tag == '\0') {
        std::string& q = quoted_names_[node.name];
        if (q.empty()) q = quote(graph_.names[node.name]);
        return q;
      }
      base = graph_.names[node.name];
    } else if (node.kind == sim::OpKind::compute && node.signature < graph_.signatures.size() &&
               !graph_.signatures[node.signature].kernel.empty()) {
      base = graph_.signatures[node.signature].kernel;
    } else if (node.kind == sim::OpKind::collective) {
      base = sim::to_string(node.op);
    } else {
      base = sim::to_string(node.kind);
    }
    if (tag == '\0') {
      scratch_ = quote(base);
    } else {
      scratch_ = quote(fmt::format("{}{} {}", tag, node.micro_batch, base));
    }
    return scratch_;
  }

  /// The signature's profile key, quoted (computed once per signature).
  const std::string& key_of(std::uint32_t signature) {
    std::string& q = quoted_keys_[signature];
    if (q.empty()) q = quote(graph_.signatures[signature].key());
    return q;
  }

  void write_args(Object& a, std::size_t i) {
    const sim::Node& node = graph_.nodes[i];
    a.str("kind", sim::to_string(node.kind)).str("phase", sim::to_string(node.phase));
    if (node.layer >= 0) a.integer("layer", node.layer);
    if (node.micro_batch >= 0) a.integer("micro_batch", node.micro_batch);
    if (node.dispatch > sim::Time::zero()) a.time("dispatch_us", node.dispatch);
    if (is_comm(node.kind)) {
      a.number("bytes", node.bytes, [&] { return fmt::format("node {} bytes", i); });
      a.time("wait_us", result_.start[i] - result_.ready[i]);
      if (result_.comm_instance[i] != sim::kNoInstance)
        a.integer("instance", result_.comm_instance[i]);
    }
    if (node.kind == sim::OpKind::collective) {
      a.str("op", sim::to_string(node.op)).integer("communicator", node.communicator);
      if (node.communicator < graph_.communicators.size()) {
        a.integer("group_size",
                  static_cast<std::int64_t>(graph_.communicators[node.communicator].ranks.size()));
      }
      if (node.algorithm) a.str("algorithm", sim::to_string(*node.algorithm));
    } else if (node.kind == sim::OpKind::send || node.kind == sim::OpKind::recv) {
      a.integer("peer", node.peer).integer("tag", node.tag);
    } else if (node.kind == sim::OpKind::compute && node.signature < graph_.signatures.size()) {
      const sim::OpSignature& sig = graph_.signatures[node.signature];
      a.str("kernel", sig.kernel).raw("key", key_of(node.signature)).integer("batch", sig.batch());
      a.number("flops", sig.flops, [&] { return fmt::format("node {} flops", i); });
    }
  }

  const sim::ExecutionGraph& graph_;
  const sim::ExecutionResult& result_;
  std::vector<std::string> quoted_names_;  ///< per graph name, quoted once ("" until needed)
  std::vector<std::string> quoted_keys_;   ///< per signature, quoted once ("" until needed)
  std::string scratch_;
  std::string out_;
  std::size_t events_ = 0;
};

}  // namespace

std::string chrome_trace_json(const sim::ExecutionGraph& graph, const sim::ExecutionResult& result,
                              const std::vector<CounterSeries>& counters,
                              const TraceMetadata& meta) {
  std::ostringstream os;
  write_chrome_trace(os, graph, result, counters, meta);
  return std::move(os).str();
}

void write_chrome_trace(std::ostream& os, const sim::ExecutionGraph& graph,
                        const sim::ExecutionResult& result, const std::vector<CounterSeries>& counters,
                        const TraceMetadata& meta) {
  check_sizes(graph, result);
  if (!graph.runs.empty()) throw sim::InternalError("chrome trace: the graph's kernels are coalesced: compile it without coalescing");
  std::set<std::string, std::less<>> keys{"title"};
  for (const auto& entry : meta.info) {
    if (!keys.insert(entry.first).second) {
      throw sim::TraceError(fmt::format(
          "chrome trace: metadata key '{}' given twice (\"title\" is the trace's title)",
          entry.first));
    }
  }
  const std::size_t ranks = graph.ranks();

  // Streams per rank and members per comm instance, in index order.
  std::vector<std::set<sim::StreamId>> streams(ranks);
  std::map<std::uint32_t, std::vector<sim::NodeId>> instances;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    const sim::Node& node = graph.nodes[i];
    streams[node.rank].insert(node.stream);
    const std::uint32_t inst = result.comm_instance[i];
    if (inst != sim::kNoInstance && is_comm(node.kind) && result.end[i] > result.start[i]) {
      instances[inst].push_back(static_cast<sim::NodeId>(i));
    }
  }

  TraceWriter w(graph, result);
  w.out().reserve(TraceWriter::kChunk + 4096);
  w.out() += "{\"traceEvents\":[\n";
  for (std::size_t r = 0; r < ranks; ++r) {
    const std::size_t stands_for = graph.represents(r);
    w.process(r + 1,
              stands_for > 1 ? fmt::format("rank {} (GPU {}, standing for {} identical GPUs)", r, graph.rank_gpu[r], stands_for)
                             : fmt::format("rank {} (GPU {})", r, graph.rank_gpu[r]),
              r);
    for (const sim::StreamId s : streams[r]) w.thread(r + 1, s);
  }
  if (!counters.empty()) w.process(ranks + 1, "network links", ranks);
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    if (shown(graph, result, i)) w.slice(i);
    w.drain(os, false);
  }
  for (auto& [inst, members] : instances) {
    // Sends before receives; collective members in node order.
    std::stable_sort(members.begin(), members.end(), [&](sim::NodeId a, sim::NodeId b) {
      return (graph.nodes[a].kind == sim::OpKind::recv) <
             (graph.nodes[b].kind == sim::OpKind::recv);
    });
    if (members.size() >= 2) w.flow(inst, members);
    w.drain(os, false);
  }
  for (const CounterSeries& series : counters) {
    w.counter(ranks + 1, series);
    w.drain(os, false);
  }
  w.out() += "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":";

  {
    Object m(w.out());
    m.str("title", meta.title);
    for (const auto& [key, value] : meta.info) m.str(key, value);
  }
  w.out() += "}\n";
  w.drain(os, true);
}

}  // namespace foresight::trace
