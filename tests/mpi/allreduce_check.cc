// A small MPI program for `testbedctl launch --mpi` (tests/e2e/launch_mpi_test.cc): every rank
// contributes rank + i (ints) and (rank + 1) * 0.5 + i (doubles) at element i, MPI_Allreduce
// sums them, and each rank checks every element against the closed form. Prints one line per
// rank and exits 1 when any element is wrong (MPI_Abort), 0 otherwise. Built with Open MPI's
// mpicxx when CMake finds MPI (Debian: libopenmpi-dev).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const int count = argc > 1 ? std::atoi(argv[1]) : 1 << 16;
  char host[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(host, &len);
  std::vector<long long> in(count), out(count);
  std::vector<double> din(count), dout(count);
  for (int i = 0; i < count; ++i) {
    in[i] = rank + i;
    din[i] = (rank + 1) * 0.5 + i;
  }
  MPI_Allreduce(in.data(), out.data(), count, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(din.data(), dout.data(), count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  long long wrong = 0;
  const long long rank_sum = static_cast<long long>(n) * (n - 1) / 2;
  const double half_sum = 0.5 * n * (n + 1) / 2;
  for (int i = 0; i < count; ++i) {
    if (out[i] != static_cast<long long>(n) * i + rank_sum) ++wrong;
    if (dout[i] != static_cast<double>(n) * i + half_sum) ++wrong;
  }
  long long total = 0;
  MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  std::printf("rank %d of %d on %s: allreduce of %d elements: %lld wrong here, %lld in all\n", rank,
              n, host, count, wrong, total);
  std::fflush(stdout);
  if (rank == 0 && total == 0) std::printf("mpi allreduce correct on %d ranks\n", n);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
