#include "common/gpu_visibility.h"

namespace cohort {

void SetGpuVisibility(const std::vector<int>& gpus, std::map<std::string, std::string>* env) {
  std::string indices;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (i > 0) indices += ",";
    indices += std::to_string(gpus[i]);
  }
  (*env)["CUDA_VISIBLE_DEVICES"] = indices;
  (*env)["NVIDIA_VISIBLE_DEVICES"] = gpus.empty() ? "void" : indices;
  if (!gpus.empty()) (*env)["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
}

}  // namespace cohort
