// Where an installed Cohort keeps its configuration and keys: <sysconfdir>/cohort of the install
// prefix, i.e. /etc/cohort for the Debian packages (prefix /usr) and /usr/local/etc/cohort for
// `cmake --install` with the default prefix. The daemons' default key paths come from here; the
// sample configs (systemd/*.conf) and the systemd units are generated from the same CMake value
// (COHORT_CONFIG_DIR), so they always agree.
//
// The value is a compile definition of config_dir.cc alone: a build for another prefix
// (scripts/package.sh, the .deb test) recompiles that one file, and ccache serves every other
// object that this build compiled.
#pragma once

#include <string>
#include <string_view>

namespace cohort {

// "/etc/cohort" for the packages.
std::string ConfigDir();
// ConfigDir() + "/" + `relative`: ConfigPath("keys/agent.key") == "/etc/cohort/keys/agent.key".
std::string ConfigPath(std::string_view relative);

}  // namespace cohort
