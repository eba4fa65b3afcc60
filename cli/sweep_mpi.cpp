// `foresight sweep --mpi`: the sweep spread over the ranks of an MPI job (cli/sweep_mpi.hpp).
//
// Every rank parses the same command line. Rank 0 makes the checks and the files (SweepSession)
// and sends one configuration index to each free rank; a rank simulates it and sends back its
// result (encode_result, after its sweep fingerprint, so that a machine that sees another scenario
// file is caught); rank 0 then sends it the next index, or a stop. Every rank ends by MPI_Finalize
// after a stop, also when rank 0 fails, so that nothing waits forever; an MPI error aborts the
// job (MPI_ERRORS_ARE_FATAL), which mpirun reports with a non-zero exit status.
#define OMPI_SKIP_MPICXX 1  // the C API only: the C++ bindings are deprecated and warn
#define MPICH_SKIP_MPICXX 1
#include "cli/sweep_mpi.hpp"

#include <fmt/core.h>
#include <mpi.h>

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <thread>

#include "cli/sweep_session.hpp"
#include "common/error.hpp"

namespace foresight::cli {
namespace {

/// The MPI tag of each message: rank 0 sends work or stop, the other ranks a result or a failure.
enum class Tag : int { work = 1, stop = 2, result = 3, failed = 4 };
constexpr std::size_t kFingerprintSize = 16;  // SweepDefinition::fingerprint: 16 hex digits

/// MPI for the life of one sweep: initialised on construction, finalised on destruction (also
/// when an error unwinds the stack, after the other ranks were told to stop).
class MpiRuntime {
 public:
  MpiRuntime() {
    int provided = 0;
    // Funneled: with one rank, rank 0 runs configurations on threads that never call MPI.
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiRuntime() { MPI_Finalize(); }
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
};

void send_index(int to, Tag tag, std::size_t config) {
  unsigned long long value = config;
  MPI_Send(&value, 1, MPI_UNSIGNED_LONG_LONG, to, static_cast<int>(tag), MPI_COMM_WORLD);
}

/// Ranks 1..K-1: simulate what rank 0 sends until it sends a stop.
int serve(const SweepOptions& o) {
  std::optional<SweepDefinition> def;
  std::optional<strategy::SimulationInputs> inputs;
  for (;;) {
    unsigned long long config = 0;
    MPI_Status status;
    MPI_Recv(&config, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
    if (status.MPI_TAG != static_cast<int>(Tag::work)) return 0;
    std::string reply;
    Tag tag = Tag::result;
    try {
      // Built on the first configuration, not before: when rank 0 rejects the input, the ranks
      // only receive a stop and print nothing.
      if (!def) def.emplace(make_sweep_definition(o));
      if (!inputs) inputs.emplace(o.flags.simulation_inputs());
      reply = def->fingerprint +
              encode_result(strategy::run_configuration(*def, static_cast<std::size_t>(config), *inputs));
    } catch (const std::exception& e) {
      tag = Tag::failed;
      reply = e.what();
    }
    MPI_Send(reply.data(), static_cast<int>(reply.size()), MPI_CHAR, 0, static_cast<int>(tag), MPI_COMM_WORLD);
  }
}

/// The next message to rank 0, waited for without spinning: blocking MPI calls poll a core, which
/// on a machine with no core to spare (K ranks on fewer cores) slows the ranks that simulate.
MPI_Status wait_for_message() {
  MPI_Status status;
  int arrived = 0;
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &arrived, &status);
    if (arrived) return status;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
}

/// Rank 0 of K > 1: hand out the configurations, gather the rows.
void lead(const SweepDefinition& def, SweepSession& session, int size) {
  const auto& todo = session.todo();
  std::size_t next = 0;
  int busy = 0;
  std::exception_ptr failure;  // the first error; once set, no more work is handed out
  std::vector<std::size_t> running(static_cast<std::size_t>(size));
  const auto hand_out = [&](int rank) {
    if (!failure && next < todo.size()) {
      running[static_cast<std::size_t>(rank)] = todo[next];
      send_index(rank, Tag::work, todo[next++]);
      ++busy;
    } else {
      send_index(rank, Tag::stop, 0);
    }
  };
  for (int rank = 1; rank < size; ++rank) hand_out(rank);
  while (busy > 0) {
    const MPI_Status status = wait_for_message();
    int bytes = 0;
    MPI_Get_count(&status, MPI_CHAR, &bytes);
    std::string message(static_cast<std::size_t>(bytes), '\0');
    MPI_Recv(message.data(), bytes, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    --busy;
    const int rank = status.MPI_SOURCE;
    const std::size_t config = running[static_cast<std::size_t>(rank)];
    try {
      if (status.MPI_TAG == static_cast<int>(Tag::failed)) {
        throw sim::InternalError(fmt::format("sweep --mpi: rank {} failed on configuration {}: {}",
                                             rank, def.describe(config), message));
      }
      const std::string fingerprint = message.substr(0, kFingerprintSize);
      if (fingerprint != def.fingerprint) {
        throw sim::ConfigError(
            fmt::format("sweep --mpi: rank {} reads another sweep (fingerprint {}, rank 0's {}): "
                        "the scenario, calibration, price or profile files differ between the "
                        "machines of the job",
                        rank, fingerprint, def.fingerprint));
      }
      session.record(config, decode_result(message.substr(kFingerprintSize)));
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
    hand_out(rank);
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

int run_sweep_mpi(const SweepOptions& o) {
  const MpiRuntime mpi;
  if (mpi.rank() != 0) return serve(o);
  std::optional<SweepDefinition> def;
  std::unique_ptr<SweepSession> session;
  try {
    def.emplace(make_sweep_definition(o));
    session = std::make_unique<SweepSession>(o, *def);
  } catch (...) {
    for (int rank = 1; rank < mpi.size(); ++rank) send_index(rank, Tag::stop, 0);
    throw;
  }
  if (mpi.size() == 1) {
    strategy::run_on_threads(*def, session->todo(), session->inputs(), o.jobs,
                             [&session](std::size_t i, const strategy::ConfigResult& r) { session->record(i, r); });
  } else {
    lead(*def, *session, mpi.size());
  }
  return session->finish();
}

}  // namespace foresight::cli
