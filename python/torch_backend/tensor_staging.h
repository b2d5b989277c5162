// Tensors as the collective library needs them: contiguous host memory, and for reductions a
// dtype it knows (float32/64, float16, bfloat16, int32/64). Operations that only move bytes
// (broadcast, gathers, scatters, all-to-all, send/recv) take any dtype.
//
// A contiguous CPU tensor is used in place. A CUDA tensor is copied to pinned host memory, a
// non-contiguous one to a contiguous copy, and one moved as bytes whose size is not a whole number
// of int32s to a padded copy (bytes travel as int32 or int64 elements, see ByteCarrier). int8,
// uint8, int16 and bool are reduced as an int32 copy and cast back: sums wrap as in the narrow
// type (as gloo's do), and a bool's SUM and MAX are OR, its MIN and PRODUCT AND (as NCCL's). The
// copy in happens on the caller's thread when the operation is issued (the values at the call,
// after the work queued on the current CUDA stream), CopyBack writes the result into the caller's
// tensor on the queue thread (WriteResult: as gloo's results land, not as an autograd operation).
// So two operations issued on one staged tensor with no wait between them each start from the
// values at their own call, not the second from the first's result (gloo reads a CPU tensor when
// the operation runs; a tensor used in place, as above, behaves so here).
//
// Errors: a tensor the library cannot take (sparse: allreduce takes COO ones before staging, see
// sparse_allreduce.h; complex for a reduction) raises a c10::Error (RuntimeError in Python) naming
// the operation and the dtype, on the caller's thread.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <vector>

#include "collective/types.h"

namespace cohort::torch_backend {

// "torch.float32", "torch.uint8": dtypes as Python users write them.
std::string DtypeName(at::ScalarType type);
// The library's type `type` is reduced as (int32 for the narrow integers and bool, which are
// widened); raises naming `what` and the dtype when it has none.
collective::DataType LibraryType(at::ScalarType type, const char* what);

// How bytes travel through the library's typed calls: as int64 or int32 elements, never a float
// type (which a wire compression could round), padded up to whole int32s.
struct ByteCarrier {
  collective::DataType type;
  size_t count;         // elements of `type`
  size_t padded_bytes;  // count * element size: `bytes` rounded up to a multiple of 4
};
ByteCarrier CarrierFor(size_t bytes);

class StagedTensor {
 public:
  enum Use {
    kReduce,  // reduced: the dtype must be one the library reduces
    kBytes,   // moved as bytes: any dtype
  };
  // What the operation does with the tensor: reads it (kIn), writes a result into it whose old
  // values do not matter (kOut), or both (kInOut). One written into must take a result
  // (CheckTakesResult), else the constructor raises.
  enum Flow { kIn, kOut, kInOut };

  StagedTensor(const at::Tensor& user, const char* what, Use use, Flow flow);

  const at::Tensor& user() const { return user_; }
  const at::Tensor& host() const { return host_; }
  void* data() const { return host_.data_ptr(); }
  size_t numel() const { return static_cast<size_t>(host_.numel()); }
  // The user tensor's bytes (the host copy may hold padding after them).
  size_t bytes() const { return static_cast<size_t>(user_.numel()) * user_.element_size(); }
  // The library's type (kReduce only).
  collective::DataType type() const { return type_; }
  // How the bytes travel (kBytes): the host buffer holds carrier().padded_bytes.
  ByteCarrier carrier() const { return CarrierFor(bytes()); }
  bool in_place() const { return in_place_; }
  // Writes the host copy into the user's tensor (nothing when in place, or for kIn).
  void CopyBack();
  // Multiplies what the operation reads by `factor` (PREMUL_SUM; a floating-point kReduce tensor),
  // in a copy of its own: the caller's tensor keeps its values until a result lands in it.
  void Premultiply(double factor);

 private:
  // The host copy as the user's dtype and shape (without padding).
  at::Tensor Unpadded() const;

  at::Tensor user_;
  at::Tensor host_;
  collective::DataType type_ = collective::DataType::kF32;
  Flow flow_;
  bool in_place_ = true;
  bool padded_ = false;  // host_ is a uint8 buffer of carrier().padded_bytes
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

// Raises, naming `what`, where `t` cannot take a result: elements that share memory (an
// expanded view), which no write can fill. On the caller's thread, before the operation is
// queued, so the group goes on (a write that fails on the queue thread fails the group).
void CheckTakesResult(const at::Tensor& t, const char* what);

// Writes `bytes` bytes at the start of `block` (a uint8 host tensor) into `user`.
void CopyBytesInto(const at::Tensor& block, const at::Tensor& user);

// user.copy_(src) for a collective's result, whatever the writing thread's autograd state: under
// torch.inference_mode's guard, so a leaf that requires grad (a parameter broadcast or all-reduced
// as it is) and a tensor made under torch.inference_mode() take it, as they do when gloo writes a
// result in place (a backend thread runs with grad mode on and outside inference mode, where
// copy_ refuses both).
void WriteResult(const at::Tensor& user, const at::Tensor& src);

// The CUDA devices among `tensors`: a future completed with them must know their devices.
std::vector<c10::Device> FutureDevices(const std::vector<at::Tensor>& tensors);

// A host tensor shaped like `like` (pinned when `like` lives on a GPU).
at::Tensor HostLike(const at::Tensor& like, at::IntArrayRef sizes);

}  // namespace cohort::torch_backend
