#pragma once
/// `foresight sweep --mpi` under `mpirun -n K`: rank 0 hands the configurations out one at a time
/// to ranks 1..K-1 as they become free (long and short simulations balance themselves), gathers
/// the rows and writes the CSV and plot exactly as the threaded sweep does; with K = 1 it runs
/// them itself on --jobs threads. Built from sweep_mpi.cpp where Meson finds MPI (option mpi),
/// else from sweep_mpi_absent.cpp, which says so: nothing else includes mpi.h.

#include "cli/sweep_definition.hpp"

namespace foresight::cli {

/// Runs the sweep of `o` as this rank's part of the MPI job; the exit status of this process (on
/// rank 0 the sweep's, on the others 0). A bad input throws on rank 0 after the other ranks were
/// told to stop; a rank that fails other than by a configuration's error makes rank 0 throw
/// InternalError naming it once every rank has stopped. ConfigError when built without MPI.
int run_sweep_mpi(const SweepOptions& o);

}  // namespace foresight::cli
