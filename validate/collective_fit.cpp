#include "validate/collective_fit.hpp"

#include <fmt/core.h>

#include <Eigen/Dense>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unsupported/Eigen/NonLinearOptimization>
#include <unsupported/Eigen/NumericalDiff>

#include "collectives/collective_run.hpp"
#include "collectives/nccl_tuner.hpp"
#include "common/error.hpp"
#include "topologies/cluster_builders.hpp"

namespace foresight::validate {
namespace {

sim::CollectiveRequest request_for(const NcclPoint& p) {
  sim::CollectiveRequest r;
  r.op = p.op;
  r.bytes = p.size_bytes;
  r.algorithm = p.algorithm;
  for (int g = 0; g < p.gpus; ++g) r.ranks.push_back(static_cast<sim::GpuId>(g));
  return r;
}

double measured_seconds(const NcclPoint& p) {
  return p.size_bytes * sim::bus_bandwidth_factor(p.op, p.gpus) / (p.busbw_GBps * 1e9);
}

/// Clusters by (spec, GPUs), built once per fit or evaluation.
class Clusters {
 public:
  const topo::Cluster& get(const NcclPoint& p) {
    const auto key = std::make_pair(p.cluster, p.gpus);
    auto it = cache_.find(key);
    if (it == cache_.end()) it = cache_.emplace(key, topo::resolve_cluster(p.cluster, p.gpus)).first;
    return it->second;
  }

 private:
  std::map<std::pair<std::string, int>, topo::Cluster> cache_;
};

/// The constants being fitted, as log-space parameters.
struct Layout {
  std::vector<sim::Protocol> free_protocols;  ///< protocols whose efficiency is fitted
  int size() const { return 2 + static_cast<int>(free_protocols.size()); }
  sim::CollectiveCalibration unpack(const Eigen::VectorXd& x) const {
    sim::CollectiveCalibration c;
    c.pipelined = true;
    c.launch_us = std::exp(x[0]);
    c.latency_scale = std::exp(x[1]);
    for (std::size_t k = 0; k < free_protocols.size(); ++k) {
      c.efficiency[static_cast<std::size_t>(free_protocols[k])] = std::exp(x[static_cast<Eigen::Index>(2 + k)]);
    }
    return c;
  }
};

/// Relative time errors of the calibration points for given constants (MINPACK functor).
struct Residuals {
  using Scalar = double;
  using InputType = Eigen::VectorXd;
  using ValueType = Eigen::VectorXd;
  using JacobianType = Eigen::MatrixXd;
  enum { InputsAtCompileTime = Eigen::Dynamic, ValuesAtCompileTime = Eigen::Dynamic };

  const std::vector<const NcclPoint*>* points;
  const topo::Cluster* cluster;
  int compute_capability;
  const Layout* layout;

  int inputs() const { return layout->size(); }
  int values() const { return static_cast<int>(points->size()); }
  int operator()(const Eigen::VectorXd& x, Eigen::VectorXd& f) const {
    sim::CollectiveConfig cfg;
    cfg.by_arch[compute_capability] = layout->unpack(x);
    for (std::size_t i = 0; i < points->size(); ++i) {
      const NcclPoint& p = *(*points)[i];
      const auto m = sim::measure_collective(*cluster, cfg, sim::NetworkKind::analytical, request_for(p));
      f[static_cast<Eigen::Index>(i)] = m.time.seconds() / measured_seconds(p) - 1.0;
    }
    return 0;
  }
};

}  // namespace

CalibrationRecord fit_series(const NcclDataset& dataset, const std::string& series_id) {
  std::vector<const NcclPoint*> points;
  for (const NcclPoint& p : dataset.points) {
    if (p.series == series_id && p.role == Role::calibration) points.push_back(&p);
  }
  if (points.empty()) throw sim::ConfigError(fmt::format("series \"{}\" has no calibration points", series_id));
  Clusters clusters;
  const topo::Cluster& cluster = clusters.get(*points.front());
  for (const NcclPoint* p : points) {
    if (p->cluster != points.front()->cluster || p->gpus != points.front()->gpus) {
      throw sim::ConfigError(fmt::format("series \"{}\": calibration points must share one cluster", series_id));
    }
  }
  std::vector<sim::GpuId> ranks;
  for (int g = 0; g < points.front()->gpus; ++g) ranks.push_back(static_cast<sim::GpuId>(g));
  const int cc = sim::communicator_facts(cluster, ranks).compute_capability;

  // Which protocols NCCL picks at the calibration sizes (the choice does not depend on the
  // calibration): only their efficiencies can be fitted.
  Layout layout;
  std::set<sim::Protocol> used;
  for (const NcclPoint* p : points) used.insert(sim::plan_collective(cluster, sim::CollectiveConfig{}, request_for(*p)).protocol);
  layout.free_protocols.assign(used.begin(), used.end());
  if (static_cast<int>(points.size()) < layout.size()) {
    throw sim::ConfigError(fmt::format("series \"{}\": {} calibration points cannot fix {} constants", series_id,
                                       points.size(), layout.size()));
  }

  const Residuals residuals{&points, &cluster, cc, &layout};
  // Levenberg-Marquardt from a fixed grid of starts (launch 5 or 20 us, latency scale 0.2 or 1,
  // efficiencies 0.7 or 1), keeping the least sum of squares: the residuals are flat wherever the
  // links rather than a constant limit the transfers, and a single start can stall there.
  // Finite differences step 1e-4 in log space: far above the picosecond rounding of simulated
  // times. Deterministic: same data, same constants.
  Eigen::VectorXd x;
  double best = std::numeric_limits<double>::infinity();
  for (const double launch : {5.0, 20.0}) {
    for (const double scale : {0.2, 1.0}) {
      for (const double eff : {0.7, 1.0}) {
        Eigen::VectorXd start = Eigen::VectorXd::Constant(layout.size(), std::log(eff));
        start[0] = std::log(launch);
        start[1] = std::log(scale);
        Eigen::NumericalDiff<Residuals> diff(residuals, 1e-8);
        Eigen::LevenbergMarquardt<Eigen::NumericalDiff<Residuals>> lm(diff);
        lm.parameters.maxfev = 2000;
        lm.parameters.xtol = 1e-12;
        lm.parameters.ftol = 1e-14;
        lm.minimize(start);
        Eigen::VectorXd f(residuals.values());
        residuals(start, f);
        if (f.squaredNorm() < best) {
          best = f.squaredNorm();
          x = start;
        }
      }
    }
  }

  // An efficiency beyond the point where the links, not the protocol, limit every calibration
  // point has no effect, and the optimizer may leave it anywhere up there. Report the smallest
  // value that gives the same residuals: the most the data supports.
  Eigen::VectorXd at_fit(residuals.values());
  residuals(x, at_fit);
  for (std::size_t k = 0; k < layout.free_protocols.size(); ++k) {
    const auto j = static_cast<Eigen::Index>(2 + k);
    double lo = std::min(x[j], 0.0) - 10.0;  // surely too low: changes the residuals
    double hi = x[j];
    Eigen::VectorXd trial = x;
    Eigen::VectorXd f(residuals.values());
    for (int it = 0; it < 60; ++it) {
      trial[j] = 0.5 * (lo + hi);
      residuals(trial, f);
      ((f - at_fit).cwiseAbs().maxCoeff() < 1e-9 ? hi : lo) = trial[j];
    }
    x[j] = hi;
  }

  CalibrationRecord rec;
  rec.compute_capability = cc;
  rec.calibration = layout.unpack(x);
  rec.calibration.name = fmt::format("sm{} fitted on {}", cc, series_id);
  for (const NcclPoint* p : points) rec.fitted_on.push_back(p->id);
  return rec;
}

CalibrationFile fit_dataset(const NcclDataset& dataset) {
  CalibrationFile file;
  std::vector<std::string> series;
  for (const NcclPoint& p : dataset.points) {
    if (p.role == Role::calibration && std::find(series.begin(), series.end(), p.series) == series.end()) {
      series.push_back(p.series);
    }
  }
  for (const auto& s : series) file.profiles.push_back(fit_series(dataset, s));
  return file;
}

std::vector<PointResult> evaluate(const NcclDataset& dataset, const sim::CollectiveConfig& config,
                                  sim::NetworkKind network) {
  Clusters clusters;
  std::vector<PointResult> out;
  for (const NcclPoint& p : dataset.points) {
    const auto m = sim::measure_collective(clusters.get(p), config, network, request_for(p));
    PointResult r;
    r.point = &p;
    r.predicted_busbw_GBps = m.busbw_GBps;
    r.error_pct = (m.busbw_GBps - p.busbw_GBps) / p.busbw_GBps * 100.0;
    r.algorithm = std::string(sim::to_string(m.plan.algorithm));
    r.protocol = std::string(sim::to_string(m.plan.protocol));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace foresight::validate
