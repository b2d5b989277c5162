#include "collective/transport/ucx/ucx_support.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "collective/protocol.h"
#include "collective/same_host.h"

namespace cohort::collective {

Status FromUcs(ucs_status_t status, const std::string& what) {
  if (status == UCS_OK) return Status::Ok();
  const std::string m = what + ": " + ucs_status_string(status);
  for (ucs_status_t gone : {UCS_ERR_ENDPOINT_TIMEOUT, UCS_ERR_CONNECTION_RESET, UCS_ERR_UNREACHABLE,
                            UCS_ERR_IO_ERROR, UCS_ERR_REJECTED, UCS_ERR_NOT_CONNECTED}) {
    if (status == gone) return Unavailable(m);
  }
  if (status == UCS_ERR_CANCELED) return Cancelled(m);
  if (status == UCS_ERR_MESSAGE_TRUNCATED) return DataLoss(m);
  if (status == UCS_ERR_TIMED_OUT) return DeadlineExceeded(m);
  return Internal(m);
}

namespace {

constexpr char kReleaseLine[] = "ucx ";
constexpr char kProtocolWord[] = " protocol ";

// "1.13.1" as a release; empty when it is not three numbers.
std::optional<UcxRelease> ParseRelease(const std::string& text) {
  UcxRelease r;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%u.%u.%u%c", &r.major, &r.minor, &r.release, &tail) != 3) {
    return std::nullopt;
  }
  return r;
}

// "7" as a protocol; empty when it is not a decimal number that fits.
std::optional<uint32_t> ParseProtocol(const std::string& text) {
  if (text.empty() || text.size() > 9 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return static_cast<uint32_t>(std::stoul(text));
}

}  // namespace

std::string UcxRelease::ToString() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

UcxRelease LoadedUcxRelease() {
  UcxRelease r;
  ucp_get_version(&r.major, &r.minor, &r.release);
  return r;
}

std::string DescribeLoadedUcx() {
  std::string text = "UCX " + LoadedUcxRelease().ToString();
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ucp_get_version), &info) != 0 && info.dli_fname != nullptr) {
    text += std::string(" (") + info.dli_fname + ")";
  }
  return text;
}

bool UcxReleasesConnect(const UcxRelease& a, const UcxRelease& b) {
  return a.major == b.major && a.minor == b.minor;
}

std::string EncodeAddress(const std::string& ucx_address) {
  return std::to_string(getpid()) + "\n" + HostIdentity() + "\n" + kReleaseLine +
         LoadedUcxRelease().ToString() + kProtocolWord + std::to_string(kCollectiveProtocol) +
         "\n" + ucx_address;
}

std::optional<PublishedAddress> DecodeAddress(const std::string& value) {
  const auto a = value.find('\n');
  if (a == std::string::npos) return std::nullopt;
  const auto b = value.find('\n', a + 1);
  if (b == std::string::npos) return std::nullopt;
  PublishedAddress out;
  out.pid = std::atoi(value.substr(0, a).c_str());
  out.host = value.substr(a + 1, b - a - 1);
  size_t rest = b + 1;
  if (value.compare(rest, sizeof(kReleaseLine) - 1, kReleaseLine) == 0) {
    const auto c = value.find('\n', rest);
    if (c == std::string::npos) return std::nullopt;
    std::string line =
        value.substr(rest + sizeof(kReleaseLine) - 1, c - rest - sizeof(kReleaseLine) + 1);
    if (const auto p = line.find(kProtocolWord); p != std::string::npos) {
      out.protocol = ParseProtocol(line.substr(p + sizeof(kProtocolWord) - 1));
      if (!out.protocol) return std::nullopt;
      line.resize(p);
    }
    out.ucx_release = ParseRelease(line);
    if (!out.ucx_release) return std::nullopt;
    rest = c + 1;
  }
  out.ucx_address = value.substr(rest);
  return out;
}

bool PeerFailureTransportsEnabled() {
  const char* tls = std::getenv("UCX_TLS");
  if (tls == nullptr || *tls == '\0' || *tls == '^') return true;
  const std::string list = std::string(",") + tls + ",";
  for (const char* t : {"all", "tcp", "rc", "ud", "dc", "ib", "rc_x", "ud_x", "dc_x", "rc_v",
                        "ud_v", "rc_mlx5", "ud_mlx5"}) {
    if (list.find(std::string(",") + t + ",") != std::string::npos) return true;
  }
  return false;
}

bool SharedMemoryTransportsEnabled() {
  const char* tls = std::getenv("UCX_TLS");
  if (tls == nullptr || *tls == '\0' || *tls == '^') return true;
  const std::string list = std::string(",") + tls + ",";
  for (const char* t : {"all", "sm", "shm", "mm", "posix", "sysv", "cma", "knem", "xpmem"}) {
    if (list.find(std::string(",") + t + ",") != std::string::npos) return true;
  }
  return false;
}

}  // namespace cohort::collective
