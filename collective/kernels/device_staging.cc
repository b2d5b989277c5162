#include "collective/kernels/device_staging.h"

#include <cuda_runtime.h>

#include <string>

namespace cohort::collective {
namespace {

struct PinnedBuffer {
  void* ptr = nullptr;
  size_t size = 0;
  ~PinnedBuffer() {
    if (ptr != nullptr) cudaFreeHost(ptr);
  }
};
thread_local PinnedBuffer t_pinned;

Status CudaStatus(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal(what + ": " + cudaGetErrorString(e));
}

}  // namespace

int CudaDeviceCount() {
  // Asked once per process: the answer does not change, and Allreduce asks on every call.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

bool IsDevicePointer(const void* p) {
  if (CudaDeviceCount() == 0) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

Status DeviceStaging::CopyIn(const void* device, size_t bytes) {
  if (t_pinned.size < bytes) {
    if (t_pinned.ptr != nullptr) cudaFreeHost(t_pinned.ptr);
    t_pinned.ptr = nullptr;
    t_pinned.size = 0;
    if (cudaError_t e = cudaMallocHost(&t_pinned.ptr, bytes); e != cudaSuccess) {
      return ResourceExhausted(std::string("pinned staging buffer: ") + cudaGetErrorString(e));
    }
    t_pinned.size = bytes;
  }
  host_ = t_pinned.ptr;
  bytes_ = bytes;
  return CudaStatus(cudaMemcpy(host_, device, bytes, cudaMemcpyDeviceToHost),
                    "copy device buffer to host");
}

Status DeviceStaging::CopyOut(void* device) const {
  return CudaStatus(cudaMemcpy(device, host_, bytes_, cudaMemcpyHostToDevice),
                    "copy result to device");
}

}  // namespace cohort::collective
