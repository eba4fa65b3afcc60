#pragma once
/// Closed-form timing of planned collectives (collectives/collective_plan.hpp) running alone: what
/// CollectiveEngine would take, event for event, when every flow moves at its standalone rate
/// (net/network_model.hpp), computed without simulating each flow.
///
/// A flow phase ends when its slowest flow has drained and its latency has passed. A ring phase
/// is a max-plus recurrence: position p sends step k when it has sent step k-1 and received step
/// k-1 from p-1, so with t_p its step's transfer time and l_p its hop latency,
///   S(k, p) = max(S(k-1, p) + t_p, S(k-1, p-1) + t_{p-1} + l_{p-1}),   S(0, p) = 0,
/// and the phase ends at max_p S(steps-1, p) + t_p + l_p. Two facts make it cheap for rings of
/// thousands of GPUs, and keep it exact (integer picoseconds throughout):
/// - a ring whose (t_p, l_p) repeat with period P (the GPUs of a node, say) keeps S(k, .) of
///   period P, so only P positions are computed;
/// - the recurrence is max-plus linear, so once S(k, .) - S(k-1, .) is the same for every
///   position it stays so (F(x + c) = F(x) + c), and the remaining steps are extrapolated.

#include <cstdint>
#include <optional>
#include <vector>

#include "collectives/collective_plan.hpp"

namespace foresight::sim {

/// How long `plan` (paths over links indexing `capacity`, bytes/s) takes from its start to its
/// completion when every flow runs at its standalone rate: always on the analytical network;
/// with `flow_level`, flows standing for several (weight > 1) share their links among them as
/// the flow-level model has them (standalone_rate with a weight).
Time standalone_duration(const CollectivePlan& plan, const std::vector<double>& capacity, bool flow_level = false);

/// How long `plan`'s phases from `first` on take alone, each with its start delay: what
/// standalone_duration adds up for them.
Time standalone_rest(const CollectivePlan& plan, std::size_t first, const std::vector<double>& capacity,
                     bool flow_level);

/// One ring of a ring phase under way, as CollectiveEngine holds it at some instant `now` once
/// every event up to `now` has run: per position, the steps it has started sending and received,
/// whether a send is in flight, when its latest finished send left (`last_done`, meaningful once
/// a send has finished) and, for a send in flight, when it will leave (`in_flight_done`).
struct RingState {
  std::vector<std::uint32_t> sent;
  std::vector<std::uint32_t> received;
  std::vector<std::uint8_t> busy;
  std::vector<Time> last_done;
  std::vector<Time> in_flight_done;
};

/// When the ring phase `ph` ends on `ring` from `state`, if every send from now on moves at its
/// standalone rate (and sends in flight leave when `state` says): the recurrence of
/// standalone_duration started from each position's own step, not from zero,
///   done(p, k) = max(done(p, k-1), done(p-1, k-1) + l_{p-1}) + t_p,
/// where a step already received counts as -inf and a finished or in-flight send as its known
/// time; the phase ends with the last step's arrival. Exact in picoseconds. None when a hop has
/// more than one finished step still on its way (only the latest finished send's time is held).
std::optional<Time> ring_end_from(const PlannedPhase& ph, const PlannedRing& ring, const RingState& state,
                                  const std::vector<double>& capacity, bool flow_level);

/// What plans started together put on a link at most at once (a ring hop's successive steps
/// count once, and of a plan's successive phases the busiest) on the flow-level model: how many
/// flows (a weighted flow counting once), the sum of their standalone rates (a weighted flow's
/// times its weight), and a bound on the bytes/s they can ever move through it together. The
/// bound takes the flows leaving one link of the source side together (a GPU's link into its
/// PCIe or NVLink switch, say): they cannot jointly exceed the slowest link all of them cross, so
/// eight channels sharing a NIC count as one NIC's rate, not eight.
struct LinkLoad {
  LinkId link = 0;
  int flows = 0;
  double rate = 0.0;
  double peak = 0.0;
};
/// Per-link accumulators standalone_load keeps between calls, so that a call costs what its
/// plans touch rather than the fabric's size (a 16,384-GPU fabric has some 300,000 links). Owned
/// by one caller at a time; its contents mean nothing between calls.
class StandaloneLoadScratch {
 public:
  StandaloneLoadScratch() = default;
  StandaloneLoadScratch(const StandaloneLoadScratch&) = delete;
  StandaloneLoadScratch& operator=(const StandaloneLoadScratch&) = delete;

 private:
  friend std::vector<LinkLoad> standalone_load(const std::vector<const CollectivePlan*>&, const std::vector<double>&,
                                               StandaloneLoadScratch*);
  friend bool keeps_standalone_rates(const std::vector<const CollectivePlan*>&, const std::vector<double>&,
                                     StandaloneLoadScratch*);
  /// Sizes the accumulators for `links` links (they only grow).
  void prepare(std::size_t links);
  /// Accumulators by link, and the links set since the last reset (each listed once).
  struct Layer {
    std::vector<LinkLoad> load;
    std::vector<char> set;
    std::vector<LinkId> links;
    LinkLoad& at(LinkId l) {
      if (!set[l]) {
        set[l] = 1;
        links.push_back(l);
      }
      return load[l];
    }
    void reset() {
      for (const LinkId l : links) {
        load[l] = LinkLoad{};
        set[l] = 0;
      }
      links.clear();
    }
    void size(std::size_t n) {
      if (load.size() < n) {
        load.resize(n);
        set.resize(n, 0);
      }
    }
  };
  /// A phase's flows by the first link of their paths: the links all of them cross (sorted),
  /// and per link the sum of their rates there, in the order first met.
  struct Group {
    std::vector<LinkId> common;
    std::vector<std::pair<LinkId, double>> rate;
  };
  Layer total_, plan_, phase_;
  std::vector<std::uint32_t> group_of_;  ///< by first link: index + 1 into groups_ (0: none)
  std::vector<Group> groups_;            ///< this phase's, in the order first met
  std::size_t live_groups_ = 0;
  std::vector<LinkId> sorted_;
};

/// The load of `plans` on each link they cross, by link. With `scratch`, its accumulators are
/// reused (the answer is the same).
std::vector<LinkLoad> standalone_load(const std::vector<const CollectivePlan*>& plans,
                                      const std::vector<double>& capacity, StandaloneLoadScratch* scratch = nullptr);
/// Whether a link of `capacity` carrying `flows` flows whose standalone rates add up to `rate`
/// lets every one of them keep its standalone rate on the flow-level network: one flow (which
/// may stand for several), or a total below the capacity with a relative margin of 1e-9, so that no fair share computed in
/// floating point falls below a flow's own rate. Then the link never limits them, whatever else
/// they meet elsewhere (Bertsekas & Gallager's max-min conditions: only saturated links bind).
bool leaves_room(int flows, double rate, double capacity);

/// Whether the flow-level network runs every flow of `plans`, started together and alone on the
/// network, at its standalone rate, so that standalone_duration is exactly its time there too:
/// every link of theirs leaves room. `scratch` as for standalone_load.
bool keeps_standalone_rates(const std::vector<const CollectivePlan*>& plans, const std::vector<double>& capacity,
                            StandaloneLoadScratch* scratch = nullptr);
/// The same from their standalone_load.
bool keeps_standalone_rates(const std::vector<LinkLoad>& load, const std::vector<double>& capacity);

}  // namespace foresight::sim
