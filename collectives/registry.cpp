#include "collectives/registry.hpp"

#include <array>

namespace foresight::sim {
namespace {

constexpr std::array kNetworks{
    RegistryEntry{"analytical", "each flow at its path's bottleneck rate, ignoring other flows (fastest)"},
    RegistryEntry{"flow", "max-min fair sharing of links, re-solved around the links a flow start or end touches "
                          "(default)"},
};

constexpr std::array kAlgorithms{
    RegistryEntry{"tree", "NCCL double binary tree across nodes, chain inside a node, pipelined (all_reduce)"},
    RegistryEntry{"ring", "NCCL ring, one per NIC rail across nodes, step by step (all collectives but all_to_all)"},
    RegistryEntry{"nvls", "NVLink SHARP: multimem reduce/multicast in the NVSwitch, one node (sm90+)"},
    RegistryEntry{"nvls_tree", "NVLink SHARP inside nodes, tree across nodes (all_reduce, sm90+)"},
    RegistryEntry{"pat", "NCCL PAT for all_gather/reduce_scatter with one GPU per node (run on the ring's flows)"},
    RegistryEntry{"hierarchical", "reduce-scatter in nodes, all-reduce across nodes per local rank, all-gather "
                                  "(Horovod; never chosen automatically)"},
    RegistryEntry{"direct", "grouped point-to-point, PXN across nodes (all_to_all(v), send_recv)"},
};

constexpr std::array kProtocols{
    RegistryEntry{"LL", "8-byte stores carrying 4 data bytes and a flag: lowest latency, half the wire bandwidth"},
    RegistryEntry{"LL128", "128-byte lines carrying 120 data bytes: needs NVLink"},
    RegistryEntry{"Simple", "bulk copies with fences: full bandwidth, highest latency"},
};

constexpr std::array kTimings{
    RegistryEntry{"nccl", "NCCL's choice and latencies with the calibrated bandwidth model, flows capped at NCCL's "
                          "rates and limited by links (default)"},
    RegistryEntry{"link-level", "textbook steps on the links alone: wire latency + bytes / link bandwidth"},
};

}  // namespace

std::span<const RegistryEntry> network_models() { return kNetworks; }
std::span<const RegistryEntry> collective_algorithms() { return kAlgorithms; }
std::span<const RegistryEntry> collective_protocols() { return kProtocols; }
std::span<const RegistryEntry> collective_timings() { return kTimings; }

}  // namespace foresight::sim
