#include "python/torch_backend/tensor_staging.h"

#include <ATen/MemoryOverlap.h>

#include <algorithm>

#include "python/torch_backend/torch_counterparts.h"

namespace cohort::torch_backend {

using collective::DataType;

namespace {

// Dtypes with a name users know, and the library type each is reduced as. The narrow integers and
// bool are reduced widened to int32 (a row whose library type is wider than the dtype).
constexpr Counterpart<at::ScalarType, DataType> kDtypes[] = {
    {at::kFloat, "torch.float32", DataType::kF32},
    {at::kDouble, "torch.float64", DataType::kF64},
    {at::kHalf, "torch.float16", DataType::kF16},
    {at::kBFloat16, "torch.bfloat16", DataType::kBF16},
    {at::kInt, "torch.int32", DataType::kI32},
    {at::kLong, "torch.int64", DataType::kI64},
    {at::kShort, "torch.int16", DataType::kI32},
    {at::kChar, "torch.int8", DataType::kI32},
    {at::kByte, "torch.uint8", DataType::kI32},
    {at::kBool, "torch.bool", DataType::kI32},
    {at::kComplexFloat, "torch.complex64", std::nullopt},
    {at::kComplexDouble, "torch.complex128", std::nullopt},
};

}  // namespace

std::string DtypeName(at::ScalarType type) {
  const auto* row = RowOf(kDtypes, type);
  return row != nullptr ? std::string(row->name) : std::string("torch.") + c10::toString(type);
}

DataType LibraryType(at::ScalarType type, const char* what) {
  const auto* row = RowOf(kDtypes, type);
  TORCH_CHECK(row != nullptr && row->library.has_value(), "cohort: ", what,
              " does not support dtype ", DtypeName(type), " (supported: ", SupportedNames(kDtypes),
              ")");
  return *row->library;
}

at::Tensor HostLike(const at::Tensor& like, at::IntArrayRef sizes) {
  return at::empty(sizes, like.options().device(at::kCPU).pinned_memory(like.is_cuda()));
}

StagedTensor::StagedTensor(const at::Tensor& user, const char* what, Use use, Flow flow)
    : user_(user), flow_(flow) {
  TORCH_CHECK(user.layout() == at::kStrided, "cohort: ", what,
              " does not support sparse tensors (layout ", user.layout(), ")");
  TORCH_CHECK(user.is_cpu() || user.is_cuda(), "cohort: ", what, " takes CPU or CUDA tensors, not ",
              user.device().str());
  if (flow != kIn) CheckTakesResult(user, what);
  const bool copy_in = flow != kOut;
  if (use == kReduce) {
    type_ = LibraryType(user.scalar_type(), what);
    if (collective::DataTypeSize(type_) != static_cast<size_t>(user.element_size())) {
      // Widened: an int32 copy is reduced; CopyBack casts the result back to the user's dtype.
      in_place_ = false;
      host_ = at::empty(user.sizes(),
                        at::TensorOptions().dtype(at::kInt).pinned_memory(user.is_cuda()));
      if (copy_in) host_.copy_(user);
      return;
    }
  }
  padded_ = use == kBytes && bytes() % 4 != 0;
  if (user.is_cpu() && user.is_contiguous() && !padded_) {
    host_ = user;
    return;
  }
  in_place_ = false;
  if (padded_) {
    host_ = at::zeros({static_cast<int64_t>(CarrierFor(bytes()).padded_bytes)},
                      at::TensorOptions().dtype(at::kByte).pinned_memory(user.is_cuda()));
    if (copy_in) Unpadded().copy_(user);
    return;
  }
  host_ = HostLike(user, user.sizes());
  if (copy_in) host_.copy_(user);
}

at::Tensor StagedTensor::Unpadded() const {
  if (!padded_) return host_;
  return host_.narrow(0, 0, static_cast<int64_t>(bytes()))
      .view(user_.scalar_type())
      .view(user_.sizes());
}

void StagedTensor::CopyBack() {
  if (!in_place_ && flow_ != kIn) WriteResult(user_, Unpadded());
}

ByteCarrier CarrierFor(size_t bytes) {
  const size_t padded = (bytes + 3) / 4 * 4;
  if (padded % 8 == 0) return ByteCarrier{DataType::kI64, padded / 8, padded};
  return ByteCarrier{DataType::kI32, padded / 4, padded};
}

void CopyBytesInto(const at::Tensor& block, const at::Tensor& user) {
  const int64_t bytes = user.numel() * static_cast<int64_t>(user.element_size());
  WriteResult(user, block.narrow(0, 0, bytes).view(user.scalar_type()).view(user.sizes()));
}

void StagedTensor::Premultiply(double factor) {
  c10::InferenceMode guard;  // the copy is the operation's, not a step of the caller's graph
  if (in_place_) {
    host_ = user_.mul(factor);
    in_place_ = false;
  } else {
    host_.mul_(factor);
  }
}

void CheckTakesResult(const at::Tensor& t, const char* what) {
  TORCH_CHECK(at::has_internal_overlap(t) != at::MemOverlap::Yes, "cohort: ", what,
              " cannot write its result into a tensor whose elements share memory (an expanded "
              "view, of shape ",
              t.sizes(), " and strides ", t.strides(), "): pass one that holds each element");
}

void WriteResult(const at::Tensor& user, const at::Tensor& src) {
  c10::InferenceMode guard;
  user.copy_(src);
}

void CoalescedRun::CopyBack() {
  int64_t offset = 0;
  for (at::Tensor& t : users) {
    WriteResult(t, flat.host().narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

std::vector<CoalescedRun> CoalesceByType(const std::vector<at::Tensor>& tensors, const char* what) {
  std::vector<at::ScalarType> order;
  for (const at::Tensor& t : tensors) {
    if (std::find(order.begin(), order.end(), t.scalar_type()) == order.end())
      order.push_back(t.scalar_type());
  }
  std::vector<CoalescedRun> runs;
  for (at::ScalarType type : order) {
    std::vector<at::Tensor> users;
    std::vector<at::Tensor> flats;
    for (const at::Tensor& t : tensors) {
      if (t.scalar_type() != type) continue;
      TORCH_CHECK(t.layout() == at::kStrided, "cohort: ", what,
                  " does not support sparse tensors (layout ", t.layout(), ")");
      CheckTakesResult(t, what);
      users.push_back(t);
      flats.push_back(t.reshape({-1}).to(at::kCPU));
    }
    at::Tensor flat = at::cat(flats);
    runs.push_back(
        CoalescedRun{users, StagedTensor(flat, what, StagedTensor::kReduce, StagedTensor::kInOut)});
  }
  return runs;
}

std::vector<c10::Device> FutureDevices(const std::vector<at::Tensor>& tensors) {
  std::vector<c10::Device> devices;
  for (const at::Tensor& t : tensors) {
    if (t.is_cuda() && std::find(devices.begin(), devices.end(), t.device()) == devices.end()) {
      devices.push_back(t.device());
    }
  }
  return devices;
}

}  // namespace cohort::torch_backend
