// `foresight sweep --mpi` in a binary built without MPI (Meson option mpi, or no MPI found).
#include "cli/sweep_mpi.hpp"
#include "common/error.hpp"

namespace foresight::cli {

int run_sweep_mpi(const SweepOptions& /*o*/) {
  throw sim::ConfigError(
      "--mpi: this foresight was built without MPI; install Open MPI (Debian: libopenmpi-dev "
      "openmpi-bin) and "
      "rebuild with `meson configure -Dmpi=enabled`, or cut the sweep with --shard I/N and join "
      "the shards with "
      "`foresight sweep-merge`");
}

}  // namespace foresight::cli
