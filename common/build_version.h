// The exact build a Cohort program comes from, for --version, an agent's registration (`cohort
// nodes`, the upgrade events) and anything else that must tell two builds apart: the project
// version, and when built from a git checkout the commit, "0.1.0+g298bf5264a1c" (semver build
// metadata), with ".dirty" when tracked files differed from that commit. Built from a tree without
// git it is the project version alone (COHORT_VERSION, common/version.h).
//
// Generated on every build (cmake/build_version.cmake) into the cohort_build_version library,
// which only the programs that report it link: a new commit recompiles one file and relinks
// those programs, not every test.
#pragma once

#include <string_view>

namespace cohort {

std::string_view CohortBuildVersion();

}  // namespace cohort
