#include "python/torch_backend/sparse_allreduce.h"

#include <algorithm>
#include <string>
#include <vector>

#include "python/torch_backend/tensor_staging.h"

namespace cohort::torch_backend {
namespace {

using collective::DataType;

// What every rank must agree on, after this rank's nonzero count:
// {nnz, dtype, sparse_dim, dense_dim, dims, size 0, ..., size kMaxSparseDims - 1}.
constexpr size_t kShapeAt = 1;
constexpr size_t kDescriptorLength = 5 + kMaxSparseDims;

std::vector<int64_t> Describe(const at::Tensor& t) {
  std::vector<int64_t> d(kDescriptorLength, 0);
  d[0] = t._nnz();
  d[1] = static_cast<int64_t>(t.scalar_type());
  d[2] = t.sparse_dim();
  d[3] = t.dense_dim();
  d[4] = t.dim();
  for (int64_t i = 0; i < t.dim(); ++i) d[5 + i] = t.size(i);
  return d;
}

// (A peer's descriptor is read within its bounds whatever its dimension count says.)
std::string Render(const int64_t* d) {
  std::string sizes;
  const int64_t dims = std::clamp<int64_t>(d[4], 0, kMaxSparseDims);
  for (int64_t i = 0; i < dims; ++i) sizes += (i ? ", " : "") + std::to_string(d[5 + i]);
  return "a sparse " + DtypeName(static_cast<at::ScalarType>(d[1])) + " tensor of size [" + sizes +
         "] with " + std::to_string(d[2]) + " sparse and " + std::to_string(d[3]) +
         " dense dimensions";
}

// Every rank's `rows` (a contiguous tensor of at most `max_rows` rows along dim 0), gathered into
// one tensor of [ranks, max_rows, ...]: rank r's rows first in block r, the rest zeros.
StatusOr<at::Tensor> AllgatherRows(collective::Communicator& comm, const at::Tensor& rows,
                                   int64_t max_rows) {
  std::vector<int64_t> shape = rows.sizes().vec();
  shape[0] = max_rows;
  int64_t row_elements = 1;
  for (int64_t d = 1; d < rows.dim(); ++d) row_elements *= rows.size(d);
  const size_t rank_bytes =
      static_cast<size_t>(max_rows * row_elements) * static_cast<size_t>(rows.element_size());
  const size_t my_bytes = static_cast<size_t>(rows.numel()) * rows.element_size();
  const ByteCarrier carrier = CarrierFor(rank_bytes);
  at::Tensor send = at::zeros({static_cast<int64_t>(carrier.padded_bytes)}, at::kByte);
  if (my_bytes > 0) {
    send.narrow(0, 0, static_cast<int64_t>(my_bytes)).copy_(rows.reshape({-1}).view(at::kByte));
  }
  at::Tensor recv = at::empty({comm.size(), static_cast<int64_t>(carrier.padded_bytes)}, at::kByte);
  COHORT_RETURN_IF_ERROR(
      comm.Allgather(send.data_ptr(), recv.data_ptr(), carrier.count, carrier.type));
  shape.insert(shape.begin(), comm.size());
  return recv.narrow(1, 0, static_cast<int64_t>(rank_bytes))
      .contiguous()
      .view(rows.scalar_type())
      .view(shape);
}

}  // namespace

StatusOr<at::Tensor> SparseAllreduceSum(collective::Communicator& comm, const at::Tensor& mine) {
  const int n = comm.size();
  const std::vector<int64_t> descriptor = Describe(mine);
  std::vector<int64_t> all(kDescriptorLength * static_cast<size_t>(n));
  COHORT_RETURN_IF_ERROR(
      comm.Allgather(descriptor.data(), all.data(), kDescriptorLength, DataType::kI64)
          .WithContext("sparse allreduce: gathering each rank's nonzero count"));
  std::vector<int64_t> nnz(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const int64_t* theirs = all.data() + kDescriptorLength * static_cast<size_t>(r);
    if (!std::equal(theirs + kShapeAt, theirs + kDescriptorLength, descriptor.begin() + kShapeAt)) {
      return InvalidArgument("the ranks disagree: worker " + std::to_string(r) + " passes " +
                             Render(theirs) + ", this worker (" + std::to_string(comm.rank()) +
                             ") " + Render(descriptor.data()));
    }
    nnz[static_cast<size_t>(r)] = theirs[0];
  }
  const int64_t max_nnz = *std::max_element(nnz.begin(), nnz.end());
  if (max_nnz == 0) return mine;

  // Indices as rows ([nnz, sparse_dim]) so that each rank's padding comes after its own.
  COHORT_ASSIGN_OR_RETURN(at::Tensor indices,
                          AllgatherRows(comm, mine._indices().t().contiguous(), max_nnz));
  COHORT_ASSIGN_OR_RETURN(at::Tensor values,
                          AllgatherRows(comm, mine._values().contiguous(), max_nnz));
  std::vector<at::Tensor> index_parts;
  std::vector<at::Tensor> value_parts;
  for (int r = 0; r < n; ++r) {
    index_parts.push_back(indices[r].narrow(0, 0, nnz[static_cast<size_t>(r)]));
    value_parts.push_back(values[r].narrow(0, 0, nnz[static_cast<size_t>(r)]));
  }
  return at::sparse_coo_tensor(at::cat(index_parts).t(), at::cat(value_parts), mine.sizes())
      .coalesce();
}

}  // namespace cohort::torch_backend
