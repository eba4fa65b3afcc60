// Mixture of experts and expert parallelism: model sizes, all-to-all volumes per MoE layer,
// balanced and skewed routing, capacity, folding, plan errors, and the Mixtral 8x7B scenario.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.hpp"
#include "models/model_zoo.hpp"
#include "strategies/moe.hpp"
#include "run/simulation.hpp"
#include "tests/strategies/moe_fixtures.hpp"
#include "tests/test_paths.hpp"
#include "topologies/cluster_builders.hpp"

using namespace foresight;
using namespace foresight::test::moe;
using Catch::Matchers::Contains;
using nlohmann::json;

TEST_CASE("Mixtral 8x7B has 46.7 B parameters, 12.9 B active per token", "[training][moe]") {
  // Jiang et al. 2024, §2: 47B total (46.7B), 13B active (12.9B).
  const auto zoo = strategy::build_model("mixtral-8x7b");
  REQUIRE(static_cast<double>(zoo.params()) == Approx(46.7e9).epsilon(0.005));
  const double inactive = 32 * (8 - 2) * expert_params(4096, 14336);
  REQUIRE(static_cast<double>(zoo.params()) - inactive == Approx(12.9e9).epsilon(0.01));
  // The Hugging Face config imports to the same model.
  const auto hf = strategy::load_hf_config(test::data_path("hf/mixtral-8x7b/config.json"), 4096);
  REQUIRE(hf.params() == zoo.params());
  REQUIRE(hf.fwd_flops() == Approx(zoo.fwd_flops()));
  // Each MoE layer: a router of h x 8 and 8 experts; FLOPs count the 2 experts a token visits.
  const auto& experts = *std::find_if(zoo.layers.begin(), zoo.layers.end(), [](const auto& l) { return l.experts > 0; });
  REQUIRE(experts.top_k == 2);
  REQUIRE(experts.fwd_flops == Approx(4096.0 * 2 * 2 * expert_params(4096, 14336)).epsilon(0.001));
}

TEST_CASE("all-to-all bytes per MoE layer: tokens x top-k x hidden x bytes, 7/8 leaving each rank", "[training][moe]") {
  const auto out = run(tiny({{"ep", 8}, {"global_batch", 16}, {"fold", false}}, 8));
  const auto& g = out.compiled.graph;
  const double tokens = 2 * 256;  // micro-batch x sequence
  const double sent = tokens * 2 /* top-k */ * 512 /* hidden */ * 2 /* bf16 */;
  std::set<std::string> names;
  int per_layer = 0;
  for (const auto& n : g.nodes) {
    if (n.rank != 0 || n.kind != sim::OpKind::collective || n.op != sim::CollectiveOp::all_to_all) continue;
    REQUIRE(n.stream == strategy::streams::expert);
    const std::string& name = g.names[n.name];
    names.insert(name);
    if (name.rfind("h.0.mlp.experts", 0) == 0) ++per_layer;
    const auto& m = g.send_matrices.at(n.matrix);
    REQUIRE(m.size() == 64);
    // Rank 0's row (tokens it sends) and column (tokens it receives) both carry `sent` bytes,
    // of which the diagonal (its own expert) stays: 1/8 under balanced routing.
    double row = 0.0, column = 0.0;
    for (int q = 0; q < 8; ++q) {
      row += m[static_cast<std::size_t>(q)];
      column += m[static_cast<std::size_t>(q * 8)];
    }
    REQUIRE(row == Approx(sent));
    REQUIRE(column == Approx(sent));
    REQUIRE(row - m[0] == Approx(sent * 7.0 / 8.0));
  }
  // Per step (2 steps, 1 micro-batch each): dispatch and combine forward, and backward.
  REQUIRE(per_layer == 2 * 4);
  REQUIRE(names.count("h.0.mlp.experts dispatch") == 1);
  REQUIRE(names.count("h.0.mlp.experts combine backward") == 1);
  // One expert per rank: nothing to sort by local expert. Two (ep 4): each MoE layer sorts and
  // unsorts, forward and backward, every token it receives (4 ranks x 512 x top 2 / 4).
  const auto sorts = [](const strategy::SimulationOutput& o) {
    std::map<std::string, std::vector<std::int64_t>> found;
    for (const auto& n : o.compiled.graph.nodes) {
      const std::string& name = o.compiled.graph.names[n.name];
      if (n.rank == 0 && n.kind == sim::OpKind::compute && name.rfind("h.0.mlp.experts.moe_", 0) == 0 &&
          name.find("sort_chunks") != std::string::npos) {
        found[name].push_back(o.compiled.graph.signatures[n.signature].shape[0]);
      }
    }
    return found;
  };
  REQUIRE(sorts(out).empty());
  const auto two = sorts(run(tiny({{"ep", 4}, {"dp", 2}, {"global_batch", 16}, {"fold", false}}, 8)));
  REQUIRE(two.size() == 4);
  for (const auto& [name, shapes] : two) {
    INFO(name);
    REQUIRE(shapes == std::vector<std::int64_t>{512 * 2, 512 * 2});  // one per step
  }
}

TEST_CASE("balanced routing: every EP rank takes the same time; a skew costs the slowest rank's excess",
          "[training][moe]") {
  // GPU-bound (no host dispatch cost), so that every GPU delay reaches the step.
  const json gpu_bound = {{"ep", 8}, {"global_batch", 16}, {"dispatch_gil", "0 us"}, {"dispatch_forward", "0 us"},
                          {"dispatch_backward", "0 us"}, {"fold", false}};
  const auto balanced = run(tiny(gpu_bound, 8));
  REQUIRE(balanced.report.expert_loads.size() == 8);
  for (const auto& l : balanced.report.expert_loads) {
    REQUIRE(l.tokens == balanced.report.expert_loads.front().tokens);
    REQUIRE(l.expert_s == Approx(balanced.report.expert_loads.front().expert_s).epsilon(1e-12));
  }
  for (const auto& b : balanced.report.per_rank) REQUIRE(b.iteration_s == balanced.report.per_rank.front().iteration_s);
  REQUIRE(balanced.report.moe_imbalance_s == Approx(0.0).margin(1e-12));
  // So one EP rank stands for all eight when they fold, with the unfolded answer.
  json alike = tiny(gpu_bound, 8);
  alike["plan"]["fold"] = true;
  const auto folded = run(alike);
  REQUIRE(folded.compiled.graph.ranks() == 1);
  REQUIRE(folded.compiled.ep_folded);
  REQUIRE(folded.report.iteration_time_s == balanced.report.iteration_time_s);
  REQUIRE(folded.report.moe_imbalance_s == 0.0);
  REQUIRE(folded.report.expert_loads.front().tokens == balanced.report.expert_loads.front().tokens);
  REQUIRE(folded.report.peak_bytes_max() == balanced.report.peak_bytes_max());
  // Expert 3 takes 30% of the assignments, the others 10%: EP rank 3 gets 3x the tokens, and
  // every MoE layer waits for it.
  json skew = gpu_bound;
  skew["moe_routing"] = {{"distribution", "histogram"}, {"file", test::data_path("routing/skewed_8.json")}, {"expected", true}};
  const auto skewed = run(tiny(skew, 8));
  const auto& loads = skewed.report.expert_loads;
  REQUIRE(loads[3].tokens == Approx(3.0 * loads[0].tokens).epsilon(0.01));
  // Every MoE layer waits for rank 3: the step grows by its extra expert time over a balanced
  // rank's plus its larger all-to-alls (rank 3 receives three times the tokens, through the
  // same NVLink port: its communication time grows by that much, within 10%). The reported cost,
  // its excess over the mean rank's, is at most the expert part.
  const double extra = loads[3].expert_s - balanced.report.expert_loads[3].expert_s;
  const double longer = skewed.report.iteration_time_s - balanced.report.iteration_time_s;
  const double excess = skewed.report.moe_imbalance_s;
  const double comm = skewed.report.per_rank[3].comm_s - balanced.report.per_rank[3].comm_s;
  CAPTURE(longer, extra, excess, comm);
  REQUIRE(comm > 0.0);
  REQUIRE(longer == Approx(extra + comm).epsilon(0.10));
  REQUIRE(longer >= extra);
  REQUIRE(excess > 0.8 * extra);
  REQUIRE(excess <= extra);
}

TEST_CASE("routing is seeded and deterministic; capacity drops what exceeds it", "[training][moe]") {
  auto model = strategy::build_model("switch-gpt-1.3b-64e");  // top-1, capacity factor 1.25
  const std::size_t layer = static_cast<std::size_t>(
      std::find_if(model.layers.begin(), model.layers.end(), [](const auto& l) { return l.experts > 0; }) -
      model.layers.begin());
  strategy::RoutingSpec zipf;
  zipf.kind = strategy::RoutingSpec::Kind::zipf;
  zipf.zipf_s = 1.2;
  strategy::MoeRouting a(model, zipf, 8, 2048), b(model, zipf, 8, 2048);
  REQUIRE(a.table(layer, 0).count == b.table(layer, 0).count);
  REQUIRE(a.table(layer, 0).count != a.table(layer, 1).count);  // another micro-batch, another draw
  zipf.seed = 7;
  strategy::MoeRouting c(model, zipf, 8, 2048);
  REQUIRE(c.table(layer, 0).count != a.table(layer, 0).count);
  // Capacity: 1.25 x 8 ranks x 2048 tokens x top-1 / 64 experts = 320 per expert.
  const auto& t = a.table(layer, 0);
  REQUIRE(t.dropped > 0.0);
  double kept = 0.0;
  for (int x = 0; x < 64; ++x) {
    REQUIRE(t.expert_tokens(x) <= 320.0);
    kept += t.expert_tokens(x);
  }
  REQUIRE(kept + t.dropped == Approx(8 * 2048.0).margin(64));
  // Dropless routing keeps every assignment.
  model.transformer->moe.capacity_factor = 0.0;
  strategy::MoeRouting dropless(model, zipf, 8, 2048);
  REQUIRE(dropless.table(layer, 0).dropped == 0.0);
}

TEST_CASE("EP groups fold across expert-data-parallel replicas with the unfolded answer", "[training][moe]") {
  for (const char* network : {"analytical", "flow"}) {
    CAPTURE(network);
    const json plan = {{"ep", 4}, {"dp", 2}, {"global_batch", 16}, {"network", network},
                       {"moe_routing", {{"distribution", "zipf"}, {"s", 0.8}}}};
    json doc = tiny(plan, 8);
    doc["plan"]["fold"] = false;
    const auto full = run(doc);
    doc["plan"]["fold"] = true;
    const auto folded = run(doc);
    REQUIRE(folded.compiled.graph.ranks() == 4);  // one EP group of 4
    REQUIRE(full.compiled.graph.ranks() == 8);
    REQUIRE(folded.report.iteration_time_s == full.report.iteration_time_s);
    REQUIRE(folded.report.moe_imbalance_s == Approx(full.report.moe_imbalance_s));
  }
}

TEST_CASE("Megatron's dispatcher: the host waits for the token counts, all-gathered over the EP group, each forward",
          "[training][moe]") {
  // tiny-mixtral: 4 MoE layers of 8 experts. EP 2, 2 micro-batches per step, 2 steps.
  for (const char* recompute : {"none", "full"}) {
    CAPTURE(recompute);
    const json plan = {{"ep", 2}, {"global_batch", 8}, {"fold", false}, {"recompute", recompute}, {"moe_host_sync", true}};
    const auto out = run(tiny(plan, 2));
    const auto& g = out.compiled.graph;
    const auto& r = out.result;
    int gathers = 0, waits = 0;
    for (sim::NodeId i = 0; i < g.nodes.size(); ++i) {
      const auto& n = g.nodes[i];
      if (n.rank != 0) continue;
      const std::string& name = g.names[n.name];
      if (name.ends_with(" token counts") && !name.ends_with(" wait for token counts")) {
        ++gathers;
        REQUIRE(n.kind == sim::OpKind::collective);
        REQUIRE(n.op == sim::CollectiveOp::all_gather);
        REQUIRE(n.stream == strategy::streams::expert);
        REQUIRE(n.bytes == 8.0 * 8 /* experts */ * 2 /* ranks */);  // int64 counts, NCCL's output size
      }
      if (!name.ends_with(" wait for token counts")) continue;
      ++waits;
      REQUIRE(n.kind == sim::OpKind::sync);
      REQUIRE(n.stream == sim::kHostStream);
      REQUIRE(n.deps.size() == 1);
      const auto& gather = g.nodes[n.deps[0]];
      const std::string layer = name.substr(0, name.size() - std::string(" wait for token counts").size());
      REQUIRE(g.names[gather.name] == layer + " token counts");
      REQUIRE(r.end[i] == r.end[n.deps[0]]);  // the host resumes when the counts have arrived
      // The next collective the host issues is the dispatch all-to-all, and the next kernel the
      // first expert's: launched after the wait, it starts no sooner than its launch (8 us)
      // after the counts arrived.
      sim::NodeId next = i + 1;
      while (g.nodes[next].rank != 0 || g.nodes[next].kind != sim::OpKind::collective) ++next;
      REQUIRE(g.nodes[next].op == sim::CollectiveOp::all_to_all);
      REQUIRE(g.names[g.nodes[next].name] == layer + " dispatch");
      REQUIRE(g.nodes[next].communicator == gather.communicator);
      REQUIRE(r.start[next] >= r.end[i]);
      while (g.nodes[next].rank != 0 || g.nodes[next].kind != sim::OpKind::compute) ++next;
      REQUIRE(g.names[g.nodes[next].name].starts_with(layer + "."));  // an expert's kernel
      REQUIRE(g.nodes[next].dispatch == sim::Time::from_ps(8'000'000));
      REQUIRE(r.start[next] >= r.end[i] + g.nodes[next].dispatch);
    }
    // One per MoE layer's forward: 4 layers x 2 micro-batches x 2 steps, again when recomputed.
    const int forwards = 4 * 2 * 2 * (std::string(recompute) == "full" ? 2 : 1);
    REQUIRE(gathers == forwards);
    REQUIRE(waits == forwards);
  }
  // Without the sync (the default; sizes known in advance), neither.
  const auto off = run(tiny({{"ep", 2}, {"global_batch", 8}, {"fold", false}}, 2));
  for (const auto& n : off.compiled.graph.nodes) {
    REQUIRE_FALSE(off.compiled.graph.names[n.name].ends_with("token counts"));
  }
}

TEST_CASE("expert parallelism shards the experts' states; EP x DP x TP x PP must fit", "[training][moe]") {
  const auto ep8 = run(tiny({{"ep", 8}, {"global_batch", 16}}, 8));
  const auto ep1 = run(tiny({{"ep", 1}, {"global_batch", 16}}, 8));
  const double per_expert = expert_params(512, 1024);
  // Per rank, ep 8 holds 1 of each layer's 8 experts instead of all 8: 7 x 4 layers fewer.
  const double fewer = 4 * 7 * per_expert * 2 /* bf16 weights */;
  REQUIRE(ep1.report.memory[0].bytes.weights - ep8.report.memory[0].bytes.weights == Approx(fewer));
  // Buffers: DDP's bucket copy of the gradients, plus the dispatch/combine buffers: a
  // micro-batch's 2 x 256 tokens x top-2 x h 512 in bf16, sent and received (balanced).
  const auto& mem = ep8.report.memory[0].bytes;
  REQUIRE(mem.buffers - mem.gradients == Approx(2.0 * 2 * 256 * 2 * 512 * 2));
  // Errors, each naming the field. (ep with tp: see expert TP below.)
  REQUIRE_THROWS_WITH(run(tiny({{"ep", 3}, {"global_batch", 12}}, 6)), Contains("/plan/ep: expected a divisor of the 8 experts"));
  REQUIRE_THROWS_WITH(run(tiny({{"ep", 4}, {"dp", 4}}, 8)), Contains("dp x tp x pp x ep x cp = 4 x 1 x 1 x 4 x 1 = 16") &&
                                                               Contains("Megatron's data-parallel size is dp x ep"));
  json dense = tiny({{"ep", 2}, {"global_batch", 16}}, 8);
  dense["model"] = {{"name", "gpt2"}};
  REQUIRE_THROWS_WITH(run(dense), Contains("/plan/ep") && Contains("no routed experts"));
  json bad = tiny({{"ep", 8}, {"global_batch", 16}, {"moe_routing", {{"distribution", "zipf"}, {"file", "x.json"}}}}, 8);
  REQUIRE_THROWS_WITH(run(bad), Contains("/plan/moe_routing/file") && Contains("histogram"));
}

TEST_CASE("Mixtral 8x7B on 64 H100: EP 8 inside each node, PP 4 x 8 virtual stages, MFU and tokens/s",
          "[training][moe]") {
  const auto out = run(json::parse(R"({
    "model": {"name": "mixtral-8x7b"}, "cluster": {"preset": "dgx-h100", "gpus": 64},
    "plan": {"ep": 8, "pp": 4, "tp": 1, "virtual_stages": 8, "schedule": "interleaved", "partition": "uniform",
             "micro_batch": 1, "global_batch": 256, "precision": "bf16", "optimizer": "adam", "fused_attention": true,
             "network": "analytical", "steps": 2},
    "workload": {"steps": 10}})"));
  const auto& r = out.report;
  REQUIRE(r.gpus == 64);
  // Balanced routing: the EP ranks are alike, so one rank per stage stands for all 16 of it.
  REQUIRE(out.compiled.graph.ranks() == 4);
  REQUIRE(r.tokens_per_s == Approx(256.0 * 4096 / r.iteration_time_s));
  REQUIRE(r.mfu > 0.1);
  REQUIRE(r.mfu < 0.9);
  REQUIRE_FALSE(r.oom());
  // Every EP group sits inside one node: the dispatch travels over NVLink only.
  const auto& g = out.compiled.graph;
  int dispatches = 0;
  std::set<std::uint32_t> checked;
  for (const auto& n : g.nodes) {
    if (n.kind != sim::OpKind::collective || n.op != sim::CollectiveOp::all_to_all) continue;
    ++dispatches;
    if (!checked.insert(n.communicator).second) continue;
    for (const auto& group : g.communicators[n.communicator].groups) {
      REQUIRE(group.size() == 8);
      for (const auto gpu : group) REQUIRE(gpu / 8 == group.front() / 8);
    }
  }
  REQUIRE(dispatches > 0);
}

TEST_CASE("EP with TP: each expert split like an MLP, EP groups across matching TP ranks", "[training][moe]") {
  // tp 2 x ep 4 on one node: TP pairs {0,1}, {2,3}, ...; TP rank j's EP group is {j, j+2, j+4, j+6}.
  const json plan = {{"ep", 4}, {"tp", 2}, {"global_batch", 8}, {"fold", false}};
  const auto out = run(tiny(plan, 8));
  const auto one = run(tiny({{"ep", 4}, {"dp", 2}, {"global_batch", 16}, {"fold", false}}, 8));
  const auto& g = out.compiled.graph;
  auto up_shape = [](const strategy::SimulationOutput& o) {
    for (const auto& n : o.compiled.graph.nodes) {
      if (n.rank == 0 && o.compiled.graph.names[n.name].find("mlp.experts.0.expert_up_fwd") != std::string::npos) {
        return o.compiled.graph.signatures[n.signature].shape;
      }
    }
    FAIL("no expert kernel");
    return std::vector<std::int64_t>{};
  };
  // The gate/up projection's 2 x 1024 outputs split over the 2 TP ranks.
  REQUIRE(up_shape(one)[1] == 2048);
  REQUIRE(up_shape(out)[1] == 1024);
  int reduces = 0;
  bool grouped = false;
  for (const auto& n : g.nodes) {
    if (n.rank != 0 || n.kind != sim::OpKind::collective) continue;
    const std::string& name = g.names[n.name];
    if (n.op == sim::CollectiveOp::all_reduce && name.find("h.0.mlp.experts output") != std::string::npos) {
      ++reduces;
      REQUIRE(n.bytes == Approx(2.0 * 256 * 512 * 2));  // b s h in bf16, as an MLP's row-parallel output
    }
    if (n.op == sim::CollectiveOp::all_to_all && !grouped) {
      std::vector<sim::GpuId> gpus;
      for (const auto r : g.communicators[n.communicator].ranks) gpus.push_back(g.rank_gpu[r]);
      REQUIRE(gpus == std::vector<sim::GpuId>{0, 2, 4, 6});
      grouped = true;
    }
  }
  REQUIRE(reduces == 2);  // one per step
  REQUIRE(grouped);
  // Folding the TP ranks gives the same answer; sequence parallelism runs too.
  json folded = tiny(plan, 8);
  folded["plan"]["fold"] = true;
  const auto f = run(folded);
  REQUIRE(f.compiled.graph.ranks() == 1);  // TP ranks and (alike) EP ranks folded
  REQUIRE(f.report.iteration_time_s == out.report.iteration_time_s);
  folded["plan"]["sequence_parallel"] = true;
  REQUIRE(run(folded).report.iteration_time_s > 0.0);
}

TEST_CASE("ZeRO-1 with experts: dense states over dp x ep, the experts' over dp, each reduced and gathered there",
          "[training][moe][zero]") {
  // Megatron-Core's distributed optimizer with expert parallelism: the dense parameters' states
  // shard over every replica (the data-parallel group of dp x ep ranks), a routed expert's over
  // the replicas holding it (the expert-data-parallel group, dp ranks).
  const double per_expert = expert_params(512, 1024);
  const auto model = strategy::load_hf_config(test::data_path("hf/tiny-mixtral/config.json"), 256);
  const double experts_all = 4 * 8 * per_expert;  // 4 layers of 8
  const double dense = static_cast<double>(model.params()) - experts_all;
  struct Collectives {
    std::map<std::size_t, double> rs, ag;  ///< bytes per rank and step by group size
    double optimizer = 0.0;                 ///< the optimizer step's bytes
  };
  auto collectives = [](const strategy::SimulationOutput& out) {
    const auto& g = out.compiled.graph;
    Collectives c;
    int steps = 0;
    for (const auto& n : g.nodes) {
      if (n.rank != 0) continue;
      if (g.names[n.name] == "optimizer step") {
        c.optimizer = g.signatures[n.signature].bytes;
        ++steps;
      }
      if (n.kind != sim::OpKind::collective || n.stream != strategy::streams::nccl) continue;
      const std::size_t size = g.communicators[n.communicator].ranks.size();
      if (n.op == sim::CollectiveOp::reduce_scatter) c.rs[size] += n.bytes;
      if (n.op == sim::CollectiveOp::all_gather) c.ag[size] += n.bytes;
    }
    for (auto* m : {&c.rs, &c.ag}) {
      for (auto& [size, bytes] : *m) bytes /= steps;
    }
    return c;
  };
  for (const int dp : {2, 1}) {
    CAPTURE(dp);
    const int ep = 8 / dp;
    const json plan = {{"ep", ep}, {"dp", dp}, {"global_batch", 16}, {"zero", 1}, {"fold", false}};
    const auto z1 = run(tiny(plan, 8));
    json ddp_plan = plan;
    ddp_plan["zero"] = 0;
    const auto z0 = run(tiny(ddp_plan, 8));
    const double experts = experts_all / ep;  // this rank's experts
    const double owned = dense / (dp * ep) + experts / dp;
    // Memory: bf16 with Adam keeps 12 bytes of optimizer state per parameter it owns.
    REQUIRE(z1.report.memory[0].bytes.optimizer == Approx(12 * owned));
    REQUIRE(z0.report.memory[0].bytes.optimizer == Approx(12 * (dense + experts)));
    REQUIRE(z1.report.memory[0].bytes.weights == z0.report.memory[0].bytes.weights);
    // The optimizer step updates what the rank owns.
    const auto c1 = collectives(z1);
    const auto c0 = collectives(z0);
    REQUIRE(c1.optimizer == Approx(c0.optimizer * owned / (dense + experts)));
    // Per step, bf16 gradients reduce-scattered and parameters gathered: the dense ones over all
    // 8 replicas, the experts' over the dp replicas holding them (none when dp = 1).
    REQUIRE(c1.rs.at(8) == Approx(2 * dense));
    REQUIRE(c1.ag.at(8) == Approx(2 * dense));
    if (dp > 1) {
      REQUIRE(c1.rs.at(static_cast<std::size_t>(dp)) == Approx(2 * experts));
      REQUIRE(c1.ag.at(static_cast<std::size_t>(dp)) == Approx(2 * experts));
    }
    REQUIRE(c1.rs.size() == (dp > 1 ? 2u : 1u));
    REQUIRE(c1.ag.size() == c1.rs.size());
    // Folded, the same answer bit for bit, on both network models.
    for (const char* network : {"analytical", "flow"}) {
      CAPTURE(network);
      json doc = tiny(plan, 8);
      doc["plan"]["network"] = network;
      const auto full = run(doc);
      doc["plan"]["fold"] = true;
      const auto folded = run(doc);
      REQUIRE(folded.compiled.graph.ranks() < full.compiled.graph.ranks());
      REQUIRE(folded.report.iteration_time_s == full.report.iteration_time_s);
    }
  }
  // Inside a pipeline (2 stages x ep 2 x dp 2): each stage's dense states over its 4 replicas,
  // its experts' over 2.
  const auto pp = run(tiny({{"ep", 2}, {"dp", 2}, {"pp", 2}, {"global_batch", 16}, {"zero", 1}, {"partition", "uniform"}, {"fold", false}}, 8));
  const auto c = collectives(pp);
  REQUIRE(c.rs.count(4) == 1);
  REQUIRE(c.rs.count(2) == 1);
  REQUIRE(c.rs.at(2) == Approx(2 * experts_all / 2 / 2));  // 2 of the 4 MoE layers, 4 of 8 experts each, bf16
  REQUIRE(c.ag.at(2) == Approx(c.rs.at(2)));
  REQUIRE_FALSE(pp.report.oom());
  // ZeRO-2/3 and hybrid sharding do not shard experts: refused, naming the field.
  REQUIRE_THROWS_WITH(run(tiny({{"ep", 4}, {"dp", 2}, {"global_batch", 16}, {"zero", 2}}, 8)),
                      Contains("/plan/ep: expected 1 with ZeRO-2") && Contains("ZeRO-1"));
  REQUIRE_THROWS_WITH(run(tiny({{"ep", 2}, {"dp", 4}, {"global_batch", 16}, {"zero", 1}, {"shard_group", 2}}, 8)),
                      Contains("/plan/shard_group: expected none with ep = 2"));
}
