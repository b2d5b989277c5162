// Tensors as the collective library needs them: contiguous host memory, and for reductions a
// dtype it knows (float32/64, float16, bfloat16, int32/64). Operations that only move bytes
// (broadcast, gathers, scatters, all-to-all, send/recv) take any dtype.
//
// A contiguous CPU tensor is used in place. A CUDA tensor is copied to pinned host memory, and a
// non-contiguous one to a contiguous copy; the copy in happens on the caller's thread when the
// operation is issued (the values at the call, after the work queued on the current CUDA stream),
// CopyBack writes the result into the caller's tensor on the queue thread.
//
// Errors: a tensor the library cannot take (sparse, an unsupported dtype for a reduction) raises a
// c10::Error (RuntimeError in Python) naming the operation and the dtype, on the caller's thread.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <vector>

#include "collective/types.h"

namespace cohort::torch_backend {

// "torch.float32", "torch.uint8": dtypes as Python users write them.
std::string DtypeName(at::ScalarType type);
// The library's type for `type`; raises naming `what` and the dtype when it has none.
collective::DataType LibraryType(at::ScalarType type, const char* what);

class StagedTensor {
 public:
  enum Use {
    kReduce,  // reduced: the dtype must be one the library reduces
    kBytes,   // moved as bytes: any dtype
  };
  enum CopyIn { kCopyIn, kNoCopyIn };  // kNoCopyIn: an output whose old values do not matter

  StagedTensor(const at::Tensor& user, const char* what, Use use, CopyIn copy_in = kCopyIn);

  const at::Tensor& user() const { return user_; }
  const at::Tensor& host() const { return host_; }
  void* data() const { return host_.data_ptr(); }
  size_t numel() const { return static_cast<size_t>(host_.numel()); }
  size_t bytes() const { return numel() * host_.element_size(); }
  // The library's type (kReduce only).
  collective::DataType type() const { return type_; }
  bool in_place() const { return in_place_; }
  // Writes the host copy into the user's tensor (nothing when in place).
  void CopyBack();

 private:
  at::Tensor user_;
  at::Tensor host_;
  collective::DataType type_ = collective::DataType::kF32;
  bool in_place_ = true;
};

// Several tensors of one dtype laid end to end in one flat host buffer (allreduce_coalesced).
struct CoalescedRun {
  std::vector<at::Tensor> users;
  StagedTensor flat;
  // Writes each tensor's part of the flat buffer back into it.
  void CopyBack();
};
// Groups `tensors` by dtype, in order of first appearance, each into one run.
std::vector<CoalescedRun> CoalesceByType(const std::vector<at::Tensor>& tensors, const char* what);

// The CUDA devices among `tensors`: a future completed with them must know their devices.
std::vector<c10::Device> FutureDevices(const std::vector<at::Tensor>& tensors);

// A host tensor shaped like `like` (pinned when `like` lives on a GPU).
at::Tensor HostLike(const at::Tensor& like, at::IntArrayRef sizes);

}  // namespace cohort::torch_backend
