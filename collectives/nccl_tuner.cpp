#include "collectives/nccl_tuner.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "common/error.hpp"

namespace foresight::sim {
namespace {

// Algorithm rows of NCCL's tables, in our enum's order (tree, ring, nvls, nvls_tree, pat).
constexpr int kNcclAlgos = 5;
constexpr int kProtos = kProtocolCount;
enum Hw { kNvlink = 0, kPci = 1, kNet = 2 };

/// Base latency (us), nccl-model.md sec. 4 (T 149-175): tree 6.8/14/8.4, ring 6.6/14/8.4,
/// NVLS and NVLSTree 0, PAT 8 (Simple only).
constexpr double kBaseLat[kNcclAlgos][kProtos] = {
    {6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {8.0, 8.0, 8.0}};
/// Per-hop latency (us) by hardware, sec. 4 (T 149-175).
constexpr double kHwLat[3][kNcclAlgos][kProtos] = {
    // NVLink
    {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 25.0}, {0, 0, 25.0}, {0, 0, 4.0}},
    // PCI
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}},
    // NET
    {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}, {0, 0, 18.0}, {0, 0, 20.9}, {0, 0, 14.0}},
};

// Per-architecture tables, rows Volta / Ampere / Hopper, columns nNodes 1 / 2 / >=3
// (sec. 3, T 139-212, 263-276).
constexpr double kLlMaxBw[3][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}};
constexpr double kPerChMaxRingLL128Bw[3][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}};
constexpr double kPerChMaxTreeLL128Bw[3][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}};
constexpr double kPerChMaxTreeBw[3][3] = {{26.5, 18.5, 10}, {24, 23.6, 17.8}, {38.7, 41.4, 36.0}};
constexpr double kPerChMaxNVLSTreeBw[3][3] = {{0, 0, 0}, {0, 0, 0}, {0, 57.7, 45.5}};

/// Tree all-reduce bandwidth correction by log2(bytes / 64), sec. 1 (T 623-627).
constexpr double kTreeCorrection[kProtos][23] = {
    {1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1, 1},
    {1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1, 1},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9},
};

/// NCCL's MAXCHANNELS (include/device.h: 64 in v2.30.7).
constexpr int kMaxChannels = 64;

/// Speeds NCCL's topology search tries (GB/s), sec. 5 (SE 1051-1067); the tails past the values
/// quoted in the reference are NCCL's search.cc arrays.
constexpr std::array kSpeedIntra{40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0};
constexpr std::array kSpeedInter{48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                                 7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
constexpr std::array kSm90SpeedIntra{60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
constexpr std::array kSm90SpeedInter{48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                     15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};

template <std::size_t N>
double largest_at_most(const std::array<double, N>& speeds, double limit) {
  for (const double s : speeds) {
    if (s <= limit + 1e-9) return s;
  }
  return speeds.back();
}

/// The largest speed the search tries inside a node (intra) or with a network (inter) that is at
/// most `limit`, by compute capability.
double intra_speed(int cc, double limit) {
  return cc >= 90 ? largest_at_most(kSm90SpeedIntra, limit) : largest_at_most(kSpeedIntra, limit);
}
double inter_speed(int cc, double limit) {
  return cc >= 90 ? largest_at_most(kSm90SpeedInter, limit) : largest_at_most(kSpeedInter, limit);
}

/// NCCL's per-lane NVLink speed by compute capability, sec. 5 (TH 19-24).
double nvlink_lane_speed(int cc) {
  if (cc >= 100) return 40.1;
  if (cc >= 90) return 20.6;
  if (cc == 86) return 12.0;
  if (cc >= 70) return 20.0;
  return 18.0;
}

/// NCCL's PCIe x16 speed (Gen3 12, Gen4 24, Gen5 48 GB/s; sec. 5, TC 545-557) from the line rate
/// (15.75, 31.5, 63 GB/s): the same 0.762 ratio for every generation.
double pcie_speed(double line_GBps) { return line_GBps * 24.0 / 31.5; }

int arch_index(int cc) { return cc >= 90 ? 2 : (cc >= 80 ? 1 : 0); }

}  // namespace

int nccl_log2i(long long v) {
  int r = -1;
  while (v > 0) {
    v >>= 1;
    ++r;
  }
  return r;
}

CommunicatorFacts communicator_facts(const Fabric& fabric, std::span<const GpuId> ranks) {
  if (ranks.empty()) throw ConfigError("a communicator needs at least one rank");
  CommunicatorFacts f;
  f.ranks = static_cast<int>(ranks.size());
  std::map<int, std::set<int>> rails_by_node;
  std::map<int, int> members_by_node;
  f.compute_capability = std::numeric_limits<int>::max();
  f.nvlink_lanes = std::numeric_limits<int>::max();
  double pcie = std::numeric_limits<double>::infinity();
  bool all_nvswitch = true;
  bool all_nvls = true;
  f.nic_bw = std::numeric_limits<double>::infinity();
  for (const GpuId g : ranks) {
    if (g >= fabric.gpu_count()) {
      throw ConfigError(fmt::format("communicator names GPU {} but the cluster has {}", g,
                                    fabric.gpu_count()));
    }
    const GpuFacts& gf = fabric.gpu(g);
    const NodeFacts& nf = fabric.node(gf.node);
    f.compute_capability = std::min(f.compute_capability, gf.compute_capability);
    f.nvlink_lanes = std::min(f.nvlink_lanes, gf.nvlink_lanes);
    pcie = std::min(pcie, gf.pcie.gigabytes_per_second());
    all_nvswitch = all_nvswitch && nf.nvswitch && gf.nvlink_lanes > 0;
    all_nvls = all_nvls && nf.nvls;
    ++members_by_node[gf.node];
    const int rail = fabric.primary_rail(g);
    if (rail >= 0) {
      rails_by_node[gf.node].insert(rail);
      f.nic_bw = std::min(f.nic_bw, nf.nic.gigabytes_per_second());
    }
    f.cpu = nf.cpu;
  }
  f.nodes = static_cast<int>(members_by_node.size());
  for (const auto& [node, count] : members_by_node) f.ranks_per_node = std::max(f.ranks_per_node, count);
  f.nvlink_intra = all_nvswitch;
  f.nvls = all_nvls && all_nvswitch;
  f.intra_bw = f.nvlink_intra ? f.nvlink_lanes * nvlink_lane_speed(f.compute_capability) : pcie_speed(pcie);
  if (!f.nvlink_intra) f.nvlink_lanes = 0;
  f.rails = std::numeric_limits<int>::max();
  for (const auto& [node, count] : members_by_node) {
    const auto it = rails_by_node.find(node);
    f.rails = std::min(f.rails, it == rails_by_node.end() ? 0 : static_cast<int>(it->second.size()));
  }
  if (!std::isfinite(f.nic_bw)) f.nic_bw = 0.0;
  if (f.nodes > 1 && f.rails == 0) {
    throw ConfigError(fmt::format(
        "a communicator spans {} nodes but a node of it has no NIC: no inter-node path", f.nodes));
  }
  return f;
}

int ring_search_channels(const CommunicatorFacts& f) {
  if (f.nodes == 1) return f.nvlink_intra ? std::min(f.nvlink_lanes, 12) : 1;
  // Several nodes: one channel per NIC (sec. 5 derived "multi-node HDR 8 x 24", "NDR 8 x 48"),
  // but the search stops once nCh x bw reaches the GPU's total NVLink bandwidth (SE 1198) and a
  // ring graph has at most MAXCHANNELS / 2 channels (IN 1176-1178): a GB200 rack's 72 NICs give
  // 16 rings at 48 GB/s, not 72.
  int ch = std::max(1, f.rails);
  if (f.nvlink_intra) {
    const double bw = inter_speed(f.compute_capability, f.nic_bw);
    ch = std::min(ch, std::max(1, static_cast<int>(std::ceil(f.intra_bw / bw - 1e-9))));
  }
  return std::min(ch, kMaxChannels / 2);
}

NcclGraphs derive_graphs(const CommunicatorFacts& f) {
  const bool sm90 = f.compute_capability >= 90;
  const auto pick_intra = [&](double limit) { return intra_speed(f.compute_capability, limit); };
  const auto pick_inter = [&](double limit) { return inter_speed(f.compute_capability, limit); };
  NcclGraphs g;
  if (f.nodes == 1) {
    // One node. The reference's derived graphs are DGX A100 12 x 20, DGX H100 12 x 30 and an
    // 8-lane H800 8 x 20 (nccl-model.md sec. 5, #892): all are min(lanes, 12) channels at the
    // largest listed speed those channels fit in the GPU's NVLink bandwidth.
    const int ch = ring_search_channels(f);
    const double bw = pick_intra(f.intra_bw / ch);
    g.ring = NcclGraph{ch, bw, bw};
  } else {
    // Several nodes: channels at the NIC's listed speed (HDR 25 -> 24, NDR 50 -> 48), within the
    // node's bandwidth.
    const int ch = ring_search_channels(f);
    double bw = pick_inter(f.nic_bw);
    // Without NVLink the NICs share the GPUs' PCIe bandwidth.
    if (!f.nvlink_intra && ch * bw > f.intra_bw) bw = pick_inter(f.intra_bw / ch);
    g.ring = NcclGraph{ch, bw, bw};
  }
  // DupChannels (SE 1036-1049): at >= 25 GB/s double the channels at half the bandwidth, except
  // on compute capability > 80 with < 50 GB/s and more than 4 channels; never past the graph's
  // MAXCHANNELS / 2.
  if (g.ring.bw_intra >= 25.0 &&
      !(f.compute_capability > 80 && g.ring.bw_intra < 50.0 && g.ring.channels > 4)) {
    const int dup = std::min(2 * g.ring.channels, kMaxChannels / 2);
    const int split = (dup + g.ring.channels - 1) / g.ring.channels;
    g.ring.channels = dup;
    g.ring.bw_intra /= split;
    g.ring.bw_inter /= split;
  }
  g.tree = g.ring;  // tree takes ring's channel count (IN 1184-1186)
  g.runtime_channels = std::min(kMaxChannels, 2 * g.ring.channels);  // CO 460
  if (f.nodes > 1 && sm90 && g.ring.bw_intra > 45.0 && g.runtime_channels < 16) {
    g.runtime_channels *= 2;  // CO 480-483
  }
  if (f.nvls && sm90) {
    // The NVLS search gives each GPU of the node a channel ("head"): 8 channels at 40 GB/s on a
    // DGX H100 (sec. 5 derived graphs); across nodes its inter speed is the NIC's.
    const int ch = f.ranks_per_node;
    const double bw = pick_intra(f.intra_bw / ch);
    g.nvls = NcclGraph{ch, bw, f.nodes > 1 ? pick_inter(f.nic_bw) : std::numeric_limits<double>::infinity()};
  }
  return g;
}

NcclTuner::NcclTuner(const CommunicatorFacts& facts) : facts_(facts), graphs_(derive_graphs(facts)) {
  compute();
}

bool NcclTuner::available(CollectiveOp op, Algorithm a, Protocol p) const {
  const auto ai = static_cast<std::size_t>(a);
  if (ai >= static_cast<std::size_t>(kNcclAlgos)) return false;
  return table_[static_cast<int>(op)][ai][static_cast<int>(p)].algbw > 0.0;
}

const NcclTuner::Entry& NcclTuner::entry(CollectiveOp op, Algorithm a, Protocol p) const {
  return table_[static_cast<int>(op)][static_cast<int>(a)][static_cast<int>(p)];
}

void NcclTuner::compute() {
  const CommunicatorFacts& f = facts_;
  const int n = f.ranks;
  const int ai = arch_index(f.compute_capability);
  const int ni = f.nodes == 1 ? 0 : (f.nodes == 2 ? 1 : 2);
  const int ppn = f.ranks_per_node;
  const int ll_row = f.nodes == 1 ? ai : (f.cpu == CpuVendor::amd ? 1 : 0);
  const double ll_max_bw = kLlMaxBw[ll_row][ni];
  const double nvls_efficiency = f.compute_capability >= 100 ? 0.74 : (f.compute_capability >= 90 ? 0.85 : 0.0);
  const Hw intra_hw = f.nvlink_intra ? kNvlink : kPci;
  // LL128 needs in-order 128-byte stores: on by default only over NVLink (path <= NVB) on
  // Volta, Ampere, Hopper and later (T 518-536, #786). Our NIC paths are PXB.
  const bool ll128_ok = f.nvlink_intra && f.compute_capability >= 70 && f.compute_capability != 86;

  for (int oi = 0; oi < kCollectiveOpCount; ++oi) {
    const auto op = static_cast<CollectiveOp>(oi);
    for (auto& row : table_[oi]) {
      for (auto& e : row) e = Entry{};
    }
    if (n < 2 || op == CollectiveOp::all_to_all || op == CollectiveOp::send_recv) continue;
    const bool is_ar = op == CollectiveOp::all_reduce;
    const bool is_agrs = op == CollectiveOp::all_gather || op == CollectiveOp::reduce_scatter;
    const int nsteps = is_ar ? 2 * (n - 1) : (is_agrs ? n - 1 : n);
    const int inter_steps = is_ar ? 2 * (f.nodes - 1) : f.nodes - 1;

    for (int a = 0; a < kNcclAlgos; ++a) {
      const auto algo = static_cast<Algorithm>(a);
      // Which algorithms exist for this collective here (sec. 2, T 294-304, 498-536).
      bool exists = false;
      switch (algo) {
        case Algorithm::tree:
          exists = is_ar;
          break;
        case Algorithm::ring:
          exists = true;
          break;
        case Algorithm::nvls:
          exists = (is_ar || is_agrs) && f.nodes == 1 && f.nvls && graphs_.nvls.channels >= 2;
          break;
        case Algorithm::nvls_tree:
          exists = is_ar && f.nodes > 1 && f.nvls && graphs_.nvls.channels >= 2;
          break;
        case Algorithm::pat:
          exists = is_agrs && ppn == 1 && f.nodes > 1 && f.compute_capability >= 60;
          break;
        default:
          break;
      }
      if (!exists) continue;
      const bool nvls_like = algo == Algorithm::nvls || algo == Algorithm::nvls_tree;
      const NcclGraph& graph = algo == Algorithm::ring ? graphs_.ring : (nvls_like ? graphs_.nvls : graphs_.tree);
      for (int p = 0; p < kProtos; ++p) {
        const auto proto = static_cast<Protocol>(p);
        if ((nvls_like || algo == Algorithm::pat) && proto != Protocol::simple) continue;
        if (proto == Protocol::ll128 && !ll128_ok) continue;

        // Bandwidth (sec. 3, T 306-383).
        const double per_ch = f.nodes <= 2 ? graph.bw_intra : graph.bw_inter;
        double bus = graph.channels * per_ch;
        const double ch = graph.channels;
        if (algo == Algorithm::ring && proto == Protocol::ll) bus = std::min(ll_max_bw, bus * 0.5);
        if (algo == Algorithm::ring && proto == Protocol::ll128) {
          bus = std::min(bus * 0.92, ch * kPerChMaxRingLL128Bw[ai][ni]);
        }
        if (algo == Algorithm::tree && is_ar) bus = std::min(bus * 0.92, ch * kPerChMaxTreeBw[ai][ni]);
        if (algo == Algorithm::tree && proto == Protocol::ll) bus = std::min(bus / 3.8, ll_max_bw);
        if (algo == Algorithm::tree && proto == Protocol::ll128) {
          bus = std::min(bus * (f.nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), ch * kPerChMaxTreeLL128Bw[ai][ni]);
        }
        if (algo == Algorithm::pat) bus *= 0.75;
        if (nvls_like) {
          double intra = graph.bw_intra * nvls_efficiency * (ch - 1.0) / ch;
          intra *= is_ar ? 2.0 : static_cast<double>(ppn - 1) / ppn;
          double inter = graph.bw_inter;
          if (algo == Algorithm::nvls_tree && f.nodes <= 2) inter *= 2.0;
          double bw = std::min(intra, inter);
          if (algo == Algorithm::nvls_tree) bw = std::min(bw, kPerChMaxNVLSTreeBw[ai][ni]);
          bus = ch * bw;
        }
        double alg = bus;
        if (!(algo != Algorithm::ring && is_agrs)) {
          alg *= (algo == Algorithm::ring || nvls_like) ? static_cast<double>(n) / nsteps : 0.5;
        }

        // Latency (sec. 4, T 384-435).
        const double base = kBaseLat[a][p];
        double intra_lat = kHwLat[intra_hw][a][p];
        double inter_lat = ppn == 1 ? kHwLat[kNet][static_cast<int>(Algorithm::tree)][p] : kHwLat[kNet][a][p];
        double lat = base;
        switch (algo) {
          case Algorithm::ring:
            if (op == CollectiveOp::broadcast || op == CollectiveOp::reduce) {
              lat += kHwLat[f.nodes > 1 ? kNet : intra_hw][a][p];  // sameChannels: one hop
            } else {
              double net_overhead = 0.0;
              if (f.nodes > 1) {
                net_overhead = (f.cpu == CpuVendor::amd ? 2.0 : 1.0) * (proto == Protocol::simple ? 3.0 : 1.0);
              }
              intra_lat = std::max(intra_lat, net_overhead);
              lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat;
            }
            break;
          case Algorithm::tree:
            lat += 2.0 * ((ppn - 1) * intra_lat + nccl_log2i(f.nodes) * inter_lat);
            break;
          case Algorithm::nvls:
            lat += intra_lat + (f.nodes > 1 ? inter_lat : 0.0);
            break;
          case Algorithm::nvls_tree:
            lat += intra_lat + 2.0 * nccl_log2i(f.nodes) * inter_lat;
            break;
          case Algorithm::pat:
            lat = 8.0 + nccl_log2i(f.nodes) * inter_lat / 3.5 + 2.8 * n;
            break;
          default:
            break;
        }
        table_[oi][a][p] = Entry{lat, alg, bus, intra_lat, inter_lat, base};
      }
    }
  }
}

double NcclTuner::Cost::time_us() const { return latency_us + bytes / (1000.0 * algbw); }

NcclTuner::Cost NcclTuner::cost(CollectiveOp op, Algorithm a, Protocol p, double bytes) const {
  if (!available(op, a, p)) {
    throw InternalError(fmt::format("NCCL tuner: {} {} {} is unavailable here", to_string(op),
                                    to_string(a), to_string(p)));
  }
  const Entry& e = entry(op, a, p);
  Cost c{e.latency_us, e.algbw, bytes};
  if (a == Algorithm::tree && op == CollectiveOp::all_reduce) {
    const int log_size = nccl_log2i(static_cast<long long>(bytes) >> 6);
    if (log_size >= 0 && log_size < 23) c.algbw *= kTreeCorrection[static_cast<int>(p)][log_size];
  }
  if (a == Algorithm::ring && p == Protocol::simple && facts_.nodes > 1 && op == CollectiveOp::all_reduce &&
      bytes / (static_cast<double>(graphs_.runtime_channels) * facts_.ranks) >= 64.0) {
    c.latency_us *= facts_.compute_capability < 80 ? 1.9 : 1.4;
  }
  return c;
}

std::optional<NcclTuner::Choice> NcclTuner::choose(CollectiveOp op, double bytes) const {
  std::optional<Choice> best;
  for (int a = 0; a < kNcclAlgos; ++a) {
    for (int p = 0; p < kProtos; ++p) {
      const auto algo = static_cast<Algorithm>(a);
      const auto proto = static_cast<Protocol>(p);
      if (!available(op, algo, proto)) continue;
      const Cost c = cost(op, algo, proto, bytes);
      if (!best || c.time_us() < best->cost.time_us()) best = Choice{algo, proto, c};
    }
  }
  return best;
}

}  // namespace foresight::sim
