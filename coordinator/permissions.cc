#include "coordinator/permissions.h"

#include <algorithm>

namespace cohort::coordinator {
namespace {

std::string Who(const std::string& caller) {
  return caller.empty() ? "a client that names no user" : "user " + caller;
}

}  // namespace

std::string CallerOf(const RoutedMessage& m) {
  return m.identity.user.empty() ? m.message.claimed_user() : m.identity.user;
}

bool Permissions::IsAdmin(const std::string& user) const {
  return !user.empty() && std::find(admins_.begin(), admins_.end(), user) != admins_.end();
}

Status Permissions::CheckOwnerOrAdmin(const std::string& caller, const std::string& owner,
                                      const std::string& action) const {
  if (owner.empty() || caller == owner || IsAdmin(caller)) return Status::Ok();
  return PermissionDenied(Who(caller) + " may not " + action + ": it is owned by " + owner +
                          " (only its owner or an admin may)");
}

Status Permissions::CheckAdmin(const std::string& caller, const std::string& action) const {
  if (IsAdmin(caller)) return Status::Ok();
  return PermissionDenied(Who(caller) + " may not " + action +
                          " (only an admin may: the coordinator's admins)");
}

}  // namespace cohort::coordinator
