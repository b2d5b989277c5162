// What differs between the torch versions the backend builds against, in one place: Debian's
// torch 1.13 (CI, the packages) and torch 2.x (pip wheels, e.g. on GPU machines). One source
// serves both; everything else in python/torch_backend/ is written against these names.
//
// - The backend's base class: in 1.13 a backend is a c10d::ProcessGroup that torch hands back as
//   the group itself; from 2.0 it is a c10d::Backend that torch wraps in a ProcessGroup (one per
//   device type; the Python creator registers "cpu" and "cuda", both served by one backend).
// - Backend::shutdown (pytorch#148798, 2025: in torch 2.14, not in 2.6): destroy_process_group
//   calls it; earlier 2.x and 1.13 have no such hook. ProcessGroupCohort declares shutdown()
//   without `override`, so one source builds against all of them: where the base declares it, it
//   overrides it.
// - Backend::setTimeout (in torch 2.14, behind torch.distributed.set_timeout; not in 2.6), and
//   Backend::abort (2.14, behind distributed_c10d._abort_process_group), the same way:
//   ProcessGroupCohort::setTimeout and abort() override them where the base declares them.
// - Backend::allreduce_sparse (torch 2.1 on): where torch routes the all-reduce of a
//   sparse CUDA tensor; 1.13 hands every sparse tensor to allreduce.
// - Backend::allgather_into_tensor_coalesced and reduce_scatter_tensor_coalesced (torch 2.1 on;
//   2.14 forwards its all_gather_single_coalesced and reduce_scatter_single_coalesced to them).
// - Backend::getError and c10d::ErrorType (in torch 2.14, not in 2.6; taken here to come with 2.8,
//   a conservative guess: on a torch that has them earlier the base's SUCCESS answers): where
//   COHORT_TORCH_HAS_ERROR_TYPE, ProcessGroupCohort::getError overrides it and torch's
//   Backend.get_error() reaches it; elsewhere the module binds get_error() itself.
// - Backend::registerAbortHook and unregisterAbortHook (2.14), overridden as shutdown is.
// - NCCL's PREMUL_SUM factor in the ReduceOp's supplement
// (torch.distributed._make_nccl_premul_sum):
//   a double, or a one-element tensor, in 1.13 the first of `tensor_factors`, in 2.x
//   `tensor_factor` (PreMulSumFactor reads whichever the supplement has).
// Work's API (wait, getFuture, result, finish, mutex_, cv_, completed_, exception_) is the same
// in both for what CohortWork uses.
#pragma once

#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace cohort::torch_backend {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define COHORT_TORCH_HAS_ALLREDUCE_SPARSE 1
#define COHORT_TORCH_HAS_TENSOR_COALESCED 1
#else
#define COHORT_TORCH_HAS_ALLREDUCE_SPARSE 0
#define COHORT_TORCH_HAS_TENSOR_COALESCED 0
#endif

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 8)
#define COHORT_TORCH_HAS_ERROR_TYPE 1
#else
#define COHORT_TORCH_HAS_ERROR_TYPE 0
#endif

// The factor of a PREMUL_SUM supplement (c10d::NCCLPreMulSumSupplement); a tensor factor is read
// to the host.
template <typename Supplement>
double PreMulSumFactor(const Supplement& s) {
  if constexpr (requires { s.tensor_factors; }) {
    if (!s.tensor_factors.empty()) return s.tensor_factors.front().template item<double>();
  } else {
    if (s.tensor_factor.defined()) return s.tensor_factor.template item<double>();
  }
  return s.double_factor;
}

}  // namespace cohort::torch_backend
