// The all-reduce of a sparse COO tensor (an nn.Embedding(sparse=True) gradient under DDP), which
// the collective library's dense all-reduces cannot take: every rank's nonzeros are all-gathered
// (its coalesced indices and values, each rank's padded to the most any rank has) and summed on
// every rank. The bytes moved grow with the ranks' nonzeros, not with the tensor's size.
//
// Contract: `mine` is a coalesced sparse COO tensor on the CPU with at most kMaxSparseDims
// dimensions. Every rank passes the same sizes, sparse and dense dimensions and dtype; a rank that
// differs is named in the error, on every rank. The result is the coalesced SUM, built on every
// rank from the same gathered bytes in rank order: the same bytes on every rank (`mine` itself
// where no rank has a nonzero).
#pragma once

#include <ATen/ATen.h>

#include "collective/communicator.h"
#include "common/status.h"

namespace cohort::torch_backend {

inline constexpr int64_t kMaxSparseDims = 8;

StatusOr<at::Tensor> SparseAllreduceSum(collective::Communicator& comm, const at::Tensor& mine);

}  // namespace cohort::torch_backend
