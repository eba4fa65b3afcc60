#pragma once
/// The timeline of a simulated run as Chrome trace-event JSON (object form), which
/// ui.perfetto.dev and chrome://tracing load (docs/architecture.md, "Outputs"). Format: the Trace Event
/// Format document (docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU)
/// as Perfetto's JSON importer reads it.
///
/// Layout of the output:
/// - one process per rank, pid = rank + 1, named "rank R (GPU g)", sorted by rank;
/// - in it one thread per stream the rank uses, tid = stream + 1, named after
///   ExecutionGraph::stream_names ("stream N" when unnamed), sorted by stream;
/// - every node a complete event ("X") on its rank's stream, ts = start, dur = end - start, in
///   microseconds written exactly from integer picoseconds (6 decimals); sync nodes of zero
///   duration are left out;
/// - each collective and each send/recv pair a flow ("s", then "t", last "f" with "bp":"e")
///   with id = its comm instance, binding its members' slices (sends before receives);
/// - counters in one more process, pid = ranks + 1, named "network links": a "C" event per point.
/// Events carry no arrays (older Perfetto importers reject them) and are written in index order,
/// so the same input gives the same bytes.

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "exec/execution_graph.hpp"
#include "exec/executor.hpp"
#include "traces/counter_series.hpp"

namespace foresight::trace {

/// What the trace's "metadata" object says about the run: its title, then (key, value) pairs
/// such as the scenario, the plan and the network model, in the given order.
struct TraceMetadata {
  std::string title;
  std::vector<std::pair<std::string, std::string>> info;
};

/// The Chrome trace-event JSON (object form) of one simulated run of `graph`:
/// {"traceEvents": [...], "displayTimeUnit": "ns", "metadata": {"title": ..., info...}}.
/// `counters` become counter tracks of the "network links" process (none when empty).
/// TraceError when result's per-node vectors (ready, start, end, comm_instance) do not have one
/// entry per node, a node names a rank the graph lacks, a node ends before it starts, a counter
/// value is not finite, or a metadata key repeats (or is "title").
std::string chrome_trace_json(const sim::ExecutionGraph& graph, const sim::ExecutionResult& result,
                              const std::vector<CounterSeries>& counters,
                              const TraceMetadata& meta);
/// The same bytes, streamed to `os` in pieces of about a megabyte as they are made, so a trace
/// never sits whole in memory. On a TraceError part of it may have been written: write to a
/// temporary file (sim::write_file_atomically's stream form) so nothing partial stays.
void write_chrome_trace(std::ostream& os, const sim::ExecutionGraph& graph,
                        const sim::ExecutionResult& result, const std::vector<CounterSeries>& counters,
                        const TraceMetadata& meta);

}  // namespace foresight::trace
