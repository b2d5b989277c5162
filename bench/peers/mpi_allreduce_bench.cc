// cohort-bench-mpi: MPI_Allreduce (sum, f32, out-of-place) timed the way nccl-tests times it, as
// the OpenMPI peer of `cohort-bench allreduce`. Run with `mpirun -np N cohort-bench-mpi ...`.
//
// Per size: `warmup` untimed calls, a barrier, `iters` timed calls; each rank's mean time per
// call is reduced with MAX to rank 0, which prints the row. The algorithm is whatever OpenMPI's
// coll framework picks; the row's "algo" says "default", or "tuned-N" when
// OMPI_MCA_coll_tuned_allreduce_algorithm=N was forced (mpirun --mca sets that variable).
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/peers/peer_bench.h"

namespace {

using cohort::bench::PeerOptions;
using cohort::bench::ResultRow;

std::string AlgoLabel() {
  const char* forced = std::getenv("OMPI_MCA_coll_tuned_allreduce_algorithm");
  const char* dynamic = std::getenv("OMPI_MCA_coll_tuned_use_dynamic_rules");
  if (forced != nullptr && dynamic != nullptr && std::strcmp(dynamic, "1") == 0 &&
      std::strcmp(forced, "0") != 0) {
    return std::string("tuned-") + forced;
  }
  return "default";
}

int Run(const PeerOptions& options, int rank, int nranks) {
  size_t max_size = 0;
  for (size_t s : options.sizes) max_size = std::max(max_size, s);
  const size_t max_count = max_size / sizeof(float);
  std::vector<float> send(max_count);
  std::vector<float> recv(max_count);
  const std::string algo = AlgoLabel();
  if (rank == 0) cohort::bench::PrintHeader(options, "mpi (MPI_Allreduce)", nranks);

  for (size_t size : options.sizes) {
    const int count = static_cast<int>(size / sizeof(float));
    cohort::bench::FillPattern(send.data(), count, rank);
    std::memset(recv.data(), 0, size);

    // Warm-up, which also estimates the time per call for --max-seconds-per-size. The
    // estimates are reduced with MAX so that every rank runs the same number of calls.
    MPI_Barrier(MPI_COMM_WORLD);
    double estimate = 0;
    if (options.warmup > 0 || options.max_seconds_per_size > 0) {
      double t0 = MPI_Wtime();
      MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double local = MPI_Wtime() - t0;
      MPI_Allreduce(&local, &estimate, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      const int more = cohort::bench::MoreWarmupFor(options, estimate);
      if (more > 0) {
        t0 = MPI_Wtime();
        for (int i = 0; i < more; ++i) {
          MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        local = (MPI_Wtime() - t0) / more;
        MPI_Allreduce(&local, &estimate, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      }
    }
    const int iters = cohort::bench::ItersFor(options, estimate);

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
      MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double local_seconds = (MPI_Wtime() - t0) / iters;
    double max_seconds = 0;
    MPI_Reduce(&local_seconds, &max_seconds, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    ResultRow row;
    row.impl = "mpi";
    row.algo = algo;
    row.size = size;
    row.time_us = max_seconds * 1e6;
    row.nranks = nranks;
    row.iters = iters;
    if (options.check) {
      // Out-of-place: recv holds the last call's result, the exact sum of the patterns.
      long long local_wrong = cohort::bench::CountWrong(recv.data(), count, nranks);
      long long total_wrong = 0;
      MPI_Reduce(&local_wrong, &total_wrong, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
      row.wrong = total_wrong;
    }
    if (rank == 0) cohort::bench::PrintRow(options, row);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int exit_code = 0;
  std::optional<PeerOptions> options =
      cohort::bench::ParsePeerOptions(argc, argv, {}, "\n  (run under mpirun -np N)", &exit_code);
  if (!options) {
    // Every rank parsed the same argv, so every rank leaves here together.
    MPI_Finalize();
    return exit_code;
  }
  int rc = Run(*options, rank, nranks);
  MPI_Finalize();
  return rc;
}
