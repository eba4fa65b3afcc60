#pragma once
// foresight replay on MLCommons Chakra execution traces (the per-rank PREFIX.RANK.et files
// ASTRA-sim consumes): their graph simulated on a cluster, beside the schedule the ETs recorded.

#include <string>

namespace foresight::cli {

struct ChakraReplayOptions {
  std::string path;         ///< a directory, a prefix, or one rank's file
  std::string comm_groups;  ///< comm-group JSON; empty: PREFIX.comm_groups.json when present
  std::string cluster;      ///< preset or topology file; empty: the ETs' recorded one, else dgx-a100
  int gpus = 0;             ///< cluster size; 0: enough for the ranks
  std::string network;      ///< analytical | flow; empty: the ETs' recorded one, else flow
  bool json = false;
  std::string output;
  std::string trace;  ///< the replayed timeline, when given
};

/// Whether `path` names Chakra ETs rather than Kineto traces.
bool is_chakra_input(const std::string& path);

int replay_chakra(const ChakraReplayOptions& o);

}  // namespace foresight::cli
