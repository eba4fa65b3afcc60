#include "validate/et_dataset.hpp"

#include <fmt/core.h>

#include <filesystem>

#include "traces/kineto.hpp"
#include "traces/pytorch_et.hpp"
#include "validate/et_replay.hpp"

#ifndef FORESIGHT_DATA_DIR
#define FORESIGHT_DATA_DIR "validate/data"
#endif

namespace foresight::validate {
namespace fs = std::filesystem;

DatasetResult run_execution_traces(const std::string& traces_dir) {
  DatasetResult out;
  out.name = "execution_traces";
  out.file = fs::path(traces_dir).lexically_normal().generic_string();
  out.source = "PARAM's DLRM job: eight ranks' PyTorch execution traces and their Kineto traces (V100-SXM2-32GB), and "
               "Chakra's and PARAM's sample ETs; see SOURCES.txt in the folder";
  out.goal_pct = 12.0;  // as trace_retime: a step predicted on shapes alone, Habitat's 11.8%
  const fs::path ets = fs::path(traces_dir) / "param" / "dlrm_pytorch_et.tar.gz";
  const fs::path kineto = fs::path(traces_dir) / "param" / "dlrm_kineto.tar.gz";
  std::error_code ec;
  if (!fs::is_regular_file(ets, ec) || !fs::is_regular_file(kineto, ec)) {
    out.message = fmt::format("skipped: {} is absent (pass --traces DIR)", ets.generic_string());
    return out;
  }
  // Reported, not enforced: an ET records ops, not the Python between them nor what the data
  // loader and copies waited for, which this host-bound recommendation step is made of.
  const std::vector<trace::PytorchEt> ranks = trace::load_pytorch_ets(ets.string());
  const std::vector<trace::KinetoTrace> measured = trace::load_kineto_files(kineto.string());
  EtReplaySettings s;
  s.cluster = std::string(FORESIGHT_DATA_DIR) + "/topologies/v100-8gpu.json";
  const EtReplay r = replay_execution_traces(ranks, s);
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    // The Kineto trace of the same rank: its distributedInfo rank, else file order.
    const trace::KinetoTrace* m = k < measured.size() ? &measured[k] : nullptr;
    for (const trace::KinetoTrace& t : measured) {
      if (t.rank == static_cast<int>(k)) m = &t;
    }
    CaseResult c;
    c.id = "param/dlrm_pytorch_et.tar.gz:" + ranks[k].path.substr(ranks[k].path.find_last_of("/:") + 1);
    c.unit = "s per step";
    if (m == nullptr || m->steps.empty()) {
      c.note = "unsupported: no measured step for this rank";
      out.cases.push_back(std::move(c));
      continue;
    }
    c.evaluated = true;
    c.predicted = r.replayed_s[k];
    c.measured = m->steps.back().dur_us * 1e-6;
    c.error_pct = (c.predicted - c.measured) / c.measured * 100.0;
    c.note = fmt::format("host ET on 8 x V100-SXM2-32GB from shapes ({} GEMMs, {} memory-bound kernels, {} collectives over 8 "
                         "ranks); measured: ProfilerStep#{} of {}",
                         r.graph.gemms, r.graph.memory, r.graph.collectives, m->steps.back().number,
                         m->path.substr(m->path.find_last_of("/:") + 1));
    out.cases.push_back(std::move(c));
  }
  // ETs whose runs recorded no time: replayed on the default cluster, reported.
  for (const char* f : {"param/1.1.0-chakra.0.0.4/resnet_2gpu_et.json.gz", "chakra/1.0.2-chakra.0.0.4.tgz"}) {
    const fs::path p = fs::path(traces_dir) / f;
    if (!fs::is_regular_file(p, ec)) continue;
    const EtReplay e = replay_execution_traces(trace::load_pytorch_ets(p.string()), EtReplaySettings{});
    CaseResult c;
    c.id = f;
    c.unit = "s per step";
    c.note = fmt::format("not compared: the trace records no time; replayed {:.3f} ms on {} ({} kernels, {} collectives, one "
                         "ET standing for {} ranks)",
                         e.iteration_s * 1e3, e.cluster.name(), e.graph.kernels, e.graph.collectives, e.graph.stands_for);
    out.cases.push_back(std::move(c));
  }
  out.message = fmt::format("host execution traces replayed from their shapes on the target GPU's compute model (no recorded "
                            "time used); {} ranks compared with their measured steps",
                            ranks.size());
  return out;
}

}  // namespace foresight::validate
