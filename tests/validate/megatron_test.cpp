// Megatron SC21 Table 1: every row's model (validate/data/megatron_sc21/<id>.json) has the
// parameter count of N21 Eq. 2, P = 12 l h^2 (1 + 13/12h + (V + s)/12 l h), and the table's
// rounded size; the scenario of each simulated row is the row's plan.
#include <catch2/catch.hpp>

#include <cmath>

#include "models/model_zoo.hpp"
#include "run/simulation.hpp"
#include "validate/megatron_dataset.hpp"

using namespace foresight;

TEST_CASE("Megatron SC21 rows: models have N21's parameter counts, scenarios the rows' plans", "[validate]") {
  const std::string file = validate::data_dir() + "/megatron_sc21_table1.json";
  const auto d = validate::load_megatron_dataset(file);
  REQUIRE(d.runs.size() == 10);
  for (const auto& r : d.runs) {
    INFO(r.id);
    const auto model = strategy::load_hf_config(validate::data_dir() + "/megatron_sc21/" + r.id + ".json", 0);
    const double l = r.layers, h = r.hidden, v = r.vocab, seq = r.seq_len;
    const double eq2 = 12.0 * l * h * h * (1.0 + 13.0 / (12.0 * h) + (v + seq) / (12.0 * l * h));
    REQUIRE(static_cast<double>(model.params()) == Approx(eq2).epsilon(1e-3));
    // The table's sizes are rounded: within 5% (1.7 B is 1.65 B by Eq. 2).
    REQUIRE(static_cast<double>(model.params()) / 1e9 == Approx(r.params_b).epsilon(0.05));
    const auto s = validate::megatron_scenario(r, file);
    if (r.layers_per_virtual_stage > 0 && r.layers / r.pp > r.layers_per_virtual_stage) {
      REQUIRE(s.plan.schedule == strategy::Schedule::interleaved);
      REQUIRE(s.plan.virtual_stages * r.layers_per_virtual_stage * r.pp == r.layers);
    }
    REQUIRE(s.plan.tp == r.tp);
    REQUIRE(s.plan.pp == r.pp);
    REQUIRE(s.plan.dp * r.tp * r.pp == r.gpus);
    REQUIRE(s.plan.dp * s.plan.micro_batch * s.plan.grad_accum == r.global_batch);
    REQUIRE(s.cluster.gpus == r.gpus);
    // The code SC21 ran: its matrix kernels at the rate the calibration row measures.
    REQUIRE(s.plan.kernel_generation == strategy::KernelGeneration::megatron_2021);
    REQUIRE(s.plan.gemm_efficiency == 1.0);
  }
  // N21 Eq. 3 for the first row: 96 B s l h^2 (1 + s/6h + V/16lh).
  const auto& r = d.runs[0];
  REQUIRE(validate::megatron_flops_per_iteration(r) ==
          Approx(96.0 * 512 * 2048 * 24 * 2304.0 * 2304.0 * (1 + 2048 / (6.0 * 2304) + 51200 / (16.0 * 24 * 2304))));
}
