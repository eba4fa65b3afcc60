#include "strategies/deepspeed_stage.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <string>
#include <utility>

namespace foresight::strategy {

namespace {

/// Bytes of a PartitionedTensor's meta tensor (runtime/utils.py, to_meta): int64 counts, the 3
/// dimensions of the shape, the rank and the t + 1 partition offsets.
double meta_bytes(int tp) { return 8.0 * (2 + 3 + 2 + tp + 1); }

/// The tag of a meta tensor beside data tag `tag` (0 activations, 1 gradients).
constexpr std::uint32_t kMetaTag = 2;

}  // namespace

DeepSpeedStage::DeepSpeedStage(const Plan& plan, RankEmitter& e, double params, std::uint32_t dp_communicator)
    : plan_(plan), e_(e), params_(params), dp_comm_(dp_communicator) {
  for (double left = params; left > 0.0; left -= kBucketElems) {
    GradientBucket b;
    b.bytes = std::min(left, kBucketElems) * gradient_bytes_per_param(plan);
    buckets_.push_back(std::move(b));
  }
}

sim::NodeId DeepSpeedStage::receive(sim::RankId peer, double bytes, std::uint32_t tag, std::string_view what,
                                    sim::Phase phase, int micro, int gathers) {
  const std::string name = "recv " + std::string(what);
  auto recv = [&](double b, std::uint32_t t, const std::string& n) {
    return e_.transfer(sim::OpKind::recv, streams::compute, peer, b, t, n, phase, micro);
  };
  if (plan_.tp <= 1) return recv(bytes, tag, name);
  e_.host_wait(recv(meta_bytes(plan_.tp), tag + kMetaTag, name + " meta"), "read " + std::string(what) + " meta", phase,
               micro);
  sim::NodeId in = recv(bytes / plan_.tp, tag, name);
  for (int i = 0; i < gathers; ++i) {
    in = e_.tp_collective({sim::CollectiveOp::all_gather, bytes, "all_gather partitioned " + std::string(what)}, {in},
                          phase, micro);
  }
  return in;
}

void DeepSpeedStage::send(sim::RankId peer, double bytes, std::uint32_t tag, std::string_view what, sim::Phase phase,
                          int micro, sim::NodeId dep) {
  const std::string name = "send " + std::string(what);
  auto send = [&](double b, std::uint32_t t, const std::string& n) {
    e_.transfer(sim::OpKind::send, streams::compute, peer, b, t, n, phase, micro, dep);
  };
  if (plan_.tp > 1) {
    e_.host_wait(dep, "copy " + std::string(what) + " meta to GPU", phase, micro);
    send(meta_bytes(plan_.tp), tag + kMetaTag, name + " meta");
  }
  send(bytes / std::max(1, plan_.tp), tag, name);
}

sim::NodeId DeepSpeedStage::accumulate(int micro, sim::NodeId last) {
  double bytes = 0.0;
  if (plan_.precision == Precision::bf16) {
    bytes = 18.0 * params_;
  } else if (micro > 0) {
    bytes = 3.0 * gradient_bytes_per_param(plan_) * params_;
  }
  if (bytes <= 0.0) return last;
  return e_.memory("accumulate gradients", bytes, streams::compute, {last}, sim::Time{}, sim::Phase::backward);
}

void DeepSpeedStage::reduce_gradients() {
  if (plan_.dp <= 1) return;
  const double grad = gradient_bytes_per_param(plan_);
  const double comm = plan_.precision == Precision::fp32 ? 4.0 : 2.0;
  std::vector<sim::NodeId> reduced;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    const double elems = buckets_[i].bytes / grad;
    const sim::NodeId cast = e_.memory("gradients to communication type", elems * (grad + comm), streams::compute, {},
                                       sim::Time{}, sim::Phase::backward);
    reduced.push_back(e_.dp_collective(sim::CollectiveOp::all_reduce, elems * comm,
                                       fmt::format("all_reduce gradients #{}", i), dp_comm_, {cast},
                                       sim::Phase::backward));
  }
  sim::Node wait = e_.make(sim::OpKind::sync, streams::compute, "wait for gradients", sim::Phase::backward);
  wait.deps = std::move(reduced);
  e_.graph().add(std::move(wait));
  for (const GradientBucket& b : buckets_) {
    e_.memory("gradients back from communication type", b.bytes / grad * (grad + comm), streams::compute, {},
              sim::Time{}, sim::Phase::backward);
  }
}

}  // namespace foresight::strategy
