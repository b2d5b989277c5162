// Staging of device buffers through pinned host memory (built only with COHORT_HAVE_CUDA).
// Debian's UCX has no CUDA support, so the Communicator copies a device buffer to pinned host
// memory, all-reduces there, and copies the result back.
//
// Thread safety: a DeviceStaging is used by one thread; the pinned buffer is cached per thread
// and reused (grows as needed).
#pragma once

#include <cstddef>

#include "common/status.h"

namespace cohort::collective {

// True if `p` is device (or managed) memory according to the CUDA runtime. False when no device
// or driver is present.
bool IsDevicePointer(const void* p);
// Number of CUDA devices usable now (0 without a driver or GPU).
int CudaDeviceCount();

class DeviceStaging {
 public:
  Status CopyIn(const void* device, size_t bytes);
  void* host() const { return host_; }
  Status CopyOut(void* device) const;

 private:
  void* host_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace cohort::collective
