#include "coordinator/peer_keys.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace cohort::coordinator {

PeerKeys::PeerKeys(std::map<std::string, std::string> dirs) : dirs_(std::move(dirs)) { Refresh(); }

void PeerKeys::Refresh() {
  missing_.clear();
  for (const auto& [domain, dir] : dirs_) Read(domain, dir);
}

void PeerKeys::Read(const std::string& domain, const std::string& dir) {
  auto listed = ReadListedKeys(dir);
  if (!listed.ok()) {
    spdlog::warn("{} keys: {}; keeping the keys read before", domain, listed.status().ToString());
    return;
  }
  listed_[domain] = std::move(*listed);
}

Status PeerKeys::Check(const std::string& domain, const PeerIdentity& identity) {
  auto dir = dirs_.find(domain);
  if (dir == dirs_.end()) return Unauthenticated("no key directory for " + domain);
  if (listed_[domain].Lists(identity.user, identity.key)) return Status::Ok();
  if (missing_.insert(domain + " " + identity.key + " " + identity.user).second) {
    Read(domain, dir->second);
    if (listed_[domain].Lists(identity.user, identity.key)) return Status::Ok();
  }
  return Unauthenticated("the key of '" + identity.user + "' (public key " + identity.key +
                         ") is no longer listed in " + dir->second + " (as " + identity.user +
                         ".pub)");
}

}  // namespace cohort::coordinator
