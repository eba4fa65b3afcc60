#include "sim/simulator.hpp"

#include <fmt/core.h>

#include "common/error.hpp"

namespace foresight::sim {
namespace {

/// splitmix64 finalizer: spreads every input bit over the word before it is folded in.
std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t fold(std::uint64_t h, std::uint64_t v) noexcept {
  return (h ^ mix(v)) * 0x100000001b3ULL;  // FNV-1a prime
}

}  // namespace

HandlerId Simulator::add_handler(EventHandler& handler, std::string name) {
  handlers_.push_back(&handler);
  handler_names_.push_back(std::move(name));
  return static_cast<HandlerId>(handlers_.size() - 1);
}

void Simulator::schedule_at(Time t, HandlerId target, std::uint32_t kind, std::uint64_t data,
                            std::int32_t prio) {
  if (t < now_) {
    throw InternalError(fmt::format("event for handler {} scheduled in the past ({} < now {})",
                                    target < handler_names_.size() ? handler_names_[target] : "?",
                                    to_string(t), to_string(now_)));
  }
  if (target >= handlers_.size()) {
    throw InternalError(fmt::format("event scheduled for unknown handler id {}", target));
  }
  queue_.push(t, prio, target, kind, data);
}

void Simulator::dispatch(const Event& e) {
  now_ = e.time;
  ++processed_;
  fingerprint_ = fold(fingerprint_, static_cast<std::uint64_t>(e.time.ps()));
  fingerprint_ = fold(fingerprint_, static_cast<std::uint64_t>(static_cast<std::uint32_t>(e.priority)));
  fingerprint_ = fold(fingerprint_, (static_cast<std::uint64_t>(e.kind) << 32) | e.target);
  handlers_[e.target]->handle(*this, e);
}

void Simulator::run() {
  stopped_ = false;
  while (!queue_.empty() && !stopped_) dispatch(queue_.pop());
}

bool Simulator::run_until(Time limit) {
  stopped_ = false;
  while (!queue_.empty() && !stopped_ && queue_.top().time <= limit) dispatch(queue_.pop());
  return !queue_.empty();
}

void Simulator::run_before(Time limit, std::int32_t prio) {
  stopped_ = false;
  while (!queue_.empty() && !stopped_) {
    const Event top = queue_.top();
    if (top.time > limit || (top.time == limit && top.priority >= prio)) break;
    dispatch(queue_.pop());
  }
}

std::vector<Event> Simulator::drain() {
  std::vector<Event> out;
  out.reserve(queue_.size());
  while (!queue_.empty()) out.push_back(queue_.pop());
  return out;
}

}  // namespace foresight::sim
