#include "common/client_config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

#include "common/job_spec.h"
#include "common/nearest_name.h"

namespace cohort {
namespace {

std::string Trim(std::string_view s) {
  const char* space = " \t\r";
  size_t b = s.find_first_not_of(space);
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(space);
  return std::string(s.substr(b, e - b + 1));
}

bool EnvSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

std::string ExpandHome(const std::string& path) {
  const char* home = std::getenv("HOME");
  if (path.rfind("~/", 0) == 0 && home != nullptr && *home != '\0') {
    return std::string(home) + path.substr(1);
  }
  return path;
}

}  // namespace

std::string ClientConfigPath() {
  if (const char* path = std::getenv("COHORT_CLIENT_CONFIG"); path != nullptr && *path != '\0') {
    return path;
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') return "";
  return std::string(home) + "/.config/cohort/client.conf";
}

Status ApplyClientConfig(const std::string& text, const std::string& path, ClientOptions& options) {
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = path + ":" + std::to_string(number) + ": ";
    std::string trimmed = Trim(line);
    if (trimmed.empty() || trimmed[0] == '#' || trimmed[0] == ';') continue;
    size_t eq = trimmed.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument(where + "expected 'name = value', got '" + trimmed + "'");
    }
    const std::string name = Trim(trimmed.substr(0, eq));
    const std::string value = Trim(trimmed.substr(eq + 1));
    if (name == "coordinator") {
      if (value.empty()) return InvalidArgument(where + "coordinator: no endpoint given");
      if (!EnvSet("COHORT_COORDINATOR")) options.endpoint = value;
    } else if (name == "insecure") {
      bool on = value == "true" || value == "yes" || value == "1";
      if (!on && value != "false" && value != "no" && value != "0") {
        return InvalidArgument(where + "insecure: expected true or false, got '" + value + "'");
      }
      if (!EnvSet("COHORT_INSECURE")) options.insecure = on;
    } else if (name == "key") {
      if (!EnvSet("COHORT_KEY")) options.key_file = ExpandHome(value);
    } else if (name == "server-key") {
      if (!EnvSet("COHORT_SERVER_KEY")) options.server_key_file = ExpandHome(value);
    } else if (name == "timeout") {
      auto timeout = ParseDuration(value);
      if (!timeout.ok() || timeout->count() <= 0) {
        return InvalidArgument(where + "timeout: expected a positive duration (5s, 1500ms), got '" +
                               value + "'");
      }
      options.timeout = *timeout;
    } else {
      const std::string nearest =
          DidYouMean(name, {"coordinator", "insecure", "key", "server-key", "timeout"});
      return InvalidArgument(where + "unknown name '" + name + "'" +
                             (nearest.empty()
                                  ? " (known: coordinator, insecure, key, server-key, timeout)"
                                  : nearest));
    }
  }
  return Status::Ok();
}

StatusOr<ClientOptions> ClientOptionsFromConfig() {
  ClientOptions options = ClientOptionsFromEnvironment();
  const std::string path = ClientConfigPath();
  if (path.empty()) return options;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    // Only a file someone named must exist.
    if (!EnvSet("COHORT_CLIENT_CONFIG") && errno == ENOENT) return options;
    return InvalidArgument("cannot read the client config " + path +
                           (EnvSet("COHORT_CLIENT_CONFIG") ? " (COHORT_CLIENT_CONFIG)" : "") +
                           ": " + std::strerror(errno));
  }
  std::stringstream text;
  text << in.rdbuf();
  COHORT_RETURN_IF_ERROR(ApplyClientConfig(text.str(), path, options));
  return options;
}

}  // namespace cohort
