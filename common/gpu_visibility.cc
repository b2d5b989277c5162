#include "common/gpu_visibility.h"

namespace cohort {

void SetGpuVisibility(const std::vector<int>& gpus, std::map<std::string, std::string>* env) {
  std::vector<std::string> names;
  for (int gpu : gpus) names.push_back(std::to_string(gpu));
  SetGpuVisibility(names, env);
}

void SetGpuVisibility(const std::vector<std::string>& gpus,
                      std::map<std::string, std::string>* env) {
  std::string list;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (i > 0) list += ",";
    list += gpus[i];
  }
  (*env)["CUDA_VISIBLE_DEVICES"] = list;
  (*env)["NVIDIA_VISIBLE_DEVICES"] = gpus.empty() ? "void" : list;
  if (!gpus.empty()) (*env)["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
}

}  // namespace cohort
