#pragma once
/// The discrete-event kernel. A Simulator is an ordinary object (no singletons, no mutable
/// statics): a sweep may run many of them on many threads. It knows no GPU and no link; models
/// are EventHandlers that reach time only through schedule_at / schedule_after.

#include <cstdint>
#include <string>
#include <vector>

#include "sim/event_queue.hpp"
#include "common/units.hpp"

namespace foresight::sim {

class Simulator;

/// A component that receives events. Registered once; addressed by its HandlerId.
class EventHandler {
 public:
  virtual ~EventHandler() = default;
  virtual void handle(Simulator& sim, const Event& event) = 0;
};

class Simulator {
 public:
  Simulator() = default;
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  /// Registers `handler` (which must outlive the run) and returns its stable id. `name` is
  /// used in error messages.
  HandlerId add_handler(EventHandler& handler, std::string name);

  /// Schedules an event at absolute time `t` >= now() (InternalError otherwise).
  void schedule_at(Time t, HandlerId target, std::uint32_t kind, std::uint64_t data = 0,
                   std::int32_t prio = priority::normal);
  /// Schedules an event `delay` >= 0 after now().
  void schedule_after(Time delay, HandlerId target, std::uint32_t kind, std::uint64_t data = 0,
                      std::int32_t prio = priority::normal) {
    schedule_at(now_ + delay, target, kind, data, prio);
  }

  /// Runs until no event is left or stop() is called.
  void run();
  /// Runs events with time <= `limit`; returns true when events remain after it.
  bool run_until(Time limit);
  /// Runs events before (`limit`, `prio`): earlier ones, and those at `limit` of a lower
  /// priority, including any they schedule there.
  void run_before(Time limit, std::int32_t prio);
  /// Removes every pending event and returns them in the order they would have run.
  std::vector<Event> drain();
  /// Makes run() return after the current event.
  void stop() noexcept { stopped_ = true; }

  Time now() const noexcept { return now_; }
  std::uint64_t events_processed() const noexcept { return processed_; }
  std::size_t pending() const noexcept { return queue_.size(); }
  /// Hash of (time, priority, kind, target) of every event dispatched so far, in order. Two runs
  /// with the same input must produce the same fingerprint.
  std::uint64_t fingerprint() const noexcept { return fingerprint_; }

 private:
  void dispatch(const Event& e);

  EventQueue queue_;
  std::vector<EventHandler*> handlers_;
  std::vector<std::string> handler_names_;
  Time now_ = Time::zero();
  std::uint64_t processed_ = 0;
  std::uint64_t fingerprint_ = 0xcbf29ce484222325ULL;  // FNV-1a offset basis
  bool stopped_ = false;
};

}  // namespace foresight::sim
