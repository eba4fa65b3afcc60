#pragma once
/// The topology JSON format: load a cluster from a file, export any cluster to it.
///
/// ```
/// { "name": "my-cluster",                        // optional; default: the file's stem
///   "description": "free text",                  // optional, for people
///   "devices": [                                 // required
///     {"id": "n0.gpu0", "kind": "gpu", "node": 0, "local_index": 0, "model": "A100-SXM4-40GB"},
///     {"id": "n0.cpu0", "kind": "cpu", "node": 0, "vendor": "amd"},        // amd|intel|other
///     {"id": "n0.nvswitch", "kind": "nvswitch", "node": 0, "nvls": false}, // nvls optional
///     {"id": "n0.pcie0", "kind": "pcie_switch", "node": 0},
///     {"id": "n0.nic0", "kind": "nic", "node": 0, "rail": 0, "port_rate": "200 Gb/s"},
///     {"id": "leaf0", "kind": "ib_leaf"}, {"id": "spine0", "kind": "ib_spine"} ],
///   "links": [                                   // required
///     {"from": "n0.gpu0", "to": "n0.nvswitch", "bandwidth": "300 GB/s", "latency": "100 ns",
///      "class": "nvlink", "duplex": true} ] }
/// ```
/// Device keys by kind (all shown are required except nvls, default false, and port_rate):
/// gpu: node, local_index, model (a catalog name, any case); cpu: node, vendor; nvswitch: node,
/// nvls; pcie_switch: node; nic: node, rail, port_rate; ib_leaf, ib_spine: none. Link keys are
/// all required; class is nvlink | pcie | infiniband | ethernet | cpu-interconnect; a duplex link
/// stands for two directed links with the same figures. Quantities are strings with units read by
/// sim's unit parser ("25 GB/s", "200 Gb/s", "0.5 us"). Nodes are numbered 0 .. N-1, GPU
/// local indices and NIC rails 0 .. k-1 within a node.
///
/// Every problem is a sim::TopologyError "<file>: <JSON pointer> (<element>): <what was
/// expected>, found <what was found>": malformed JSON (with the byte offset), unknown keys
/// anywhere, missing keys, wrong JSON types, duplicate ids, unknown kind / class / vendor / GPU
/// model, links naming an id that does not exist, bandwidth zero or negative, negative latency,
/// duplicate local indices or rails, and GPUs that cannot reach each other (ClusterBuilder::build).

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "topologies/cluster.hpp"

namespace foresight::topo {

/// Reads and validates a topology file. The cluster's name defaults to the file's stem.
Cluster load_topology_file(const std::string& path);

/// Parses topology JSON text; `origin` names it in error messages (a path, "<string>").
/// `default_name` is used when the document has no "name".
Cluster parse_topology(std::string_view text, std::string_view origin,
                       std::string_view default_name = "cluster");

/// Validates an already-parsed document (see parse_topology).
Cluster load_topology(const nlohmann::json& doc, std::string_view origin,
                      std::string_view default_name = "cluster");

/// The cluster as a topology document that load_topology reads back to the same devices (same
/// ids and order) and links (same ids, endpoints, rates, latencies and classes). Links added as
/// duplex pairs are written once with "duplex": true. Quantities are written exactly: bandwidth
/// in GB/s when that round-trips bit for bit, else in B/s; latency in us, ns or ps.
nlohmann::json topology_to_json(const Cluster& cluster);

/// The same document as text, keys in a readable order and one device or link per line.
std::string topology_to_string(const Cluster& cluster);

}  // namespace foresight::topo
