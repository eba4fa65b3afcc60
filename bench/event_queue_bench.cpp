// Event-queue throughput: 10^6 events through the raw queue, and through a Simulator whose
// handler keeps a steady population of pending events (the kernel's hot path). Prints events/s.
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <random>

#include "sim/simulator.hpp"

using namespace foresight::sim;

namespace {

constexpr int kEvents = 1'000'000;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Each event schedules one more at a random delay, until the budget is spent.
struct Churn final : EventHandler {
  HandlerId self = 0;
  std::mt19937_64 rng{42};
  int left = kEvents;
  void handle(Simulator& sim, const Event&) override {
    if (--left > 0) sim.schedule_after(Time::from_ps(static_cast<std::int64_t>(rng() % 1'000'000)), self, 0);
  }
};

}  // namespace

int main() {
  {
    EventQueue q;
    q.reserve(kEvents);
    std::mt19937_64 rng(1);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kEvents; ++i) q.push(Time::from_ps(static_cast<std::int64_t>(rng() % 1'000'000'000)), 0, 0, 0, 0);
    std::uint64_t sum = 0;
    while (!q.empty()) sum += q.pop().seq;
    const double s = seconds_since(t0);
    fmt::print("event queue: {} pushes + pops of a 10^6-event heap in {:.3f} s: {:.2f} M events/s (checksum {})\n",
               kEvents, s, kEvents / s * 1e-6, sum % 1000);
  }
  for (const int population : {1, 1000, 100000, 1000000}) {
    Simulator sim;
    Churn churn;
    churn.self = sim.add_handler(churn, "churn");
    churn.left = kEvents + population;
    for (int i = 0; i < population; ++i) sim.schedule_at(Time::from_ps(i), churn.self, 0);
    const auto t0 = std::chrono::steady_clock::now();
    sim.run();
    const double s = seconds_since(t0);
    fmt::print("simulator: {} events with {} pending in {:.3f} s: {:.2f} M events/s (fingerprint {:016x})\n",
               sim.events_processed(), population, s, static_cast<double>(sim.events_processed()) / s * 1e-6,
               sim.fingerprint());
  }
  return 0;
}
