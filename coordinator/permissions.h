// Permissions decides who may change what through the client endpoint (DESIGN.md "Identity"):
// the owner of a job or study, or an admin (the coordinator's `admins`, --admins a,b), may cancel
// or delete it, and read its job or study file (`cohort status --spec`, `cohort trials --spec`:
// its env may hold credentials); only an admin may act on nodes (drain, cordon, forget). Everyone
// may list and read jobs, studies, logs and nodes.
//
// Who the caller is (CallerOf): over CURVE, the name its key is listed under (clients/<user>.pub),
// verified by the handshake. With --insecure nothing is verified: the caller is the user its
// client claims (Envelope.user: the CLI and the Python client send their local account name) and
// is checked the same way. That protects against mistakes (cancelling a colleague's job by a
// typo), not against attackers, who can claim to be anyone. A caller that claims no user is
// nobody: it may change only what has no owner.
//
// Something with no owner (a job or study stored before owners were recorded) may be changed by
// anyone, as before owners existed.
//
// Thread safety: const methods only; safe to share. Errors: PERMISSION_DENIED naming the caller,
// what it tried and the owner.
#pragma once

#include <string>
#include <vector>

#include "common/messaging.h"
#include "common/status.h"

namespace cohort::coordinator {

// The user a client request speaks for: identity.user over CURVE, else the user the message
// claims (Envelope.user; "" when none).
std::string CallerOf(const RoutedMessage& m);

class Permissions {
 public:
  Permissions() = default;
  explicit Permissions(std::vector<std::string> admins) : admins_(std::move(admins)) {}

  bool IsAdmin(const std::string& user) const;
  // OK when `caller` is `owner`, an admin, or `owner` is empty; else PERMISSION_DENIED:
  // "user bob may not cancel job x: it is owned by alice (only its owner or an admin may)".
  // `action`: what the caller tried, as "cancel job x".
  Status CheckOwnerOrAdmin(const std::string& caller, const std::string& owner,
                           const std::string& action) const;
  // OK when `caller` is an admin; else PERMISSION_DENIED naming the action ("drain node n1").
  Status CheckAdmin(const std::string& caller, const std::string& action) const;

  const std::vector<std::string>& admins() const { return admins_; }

 private:
  std::vector<std::string> admins_;
};

}  // namespace cohort::coordinator
