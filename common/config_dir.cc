#include "common/config_dir.h"

namespace cohort {

std::string ConfigDir() { return COHORT_CONFIG_DIR; }

std::string ConfigPath(std::string_view relative) {
  return ConfigDir() + "/" + std::string(relative);
}

}  // namespace cohort
