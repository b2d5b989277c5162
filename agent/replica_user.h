// ReplicaUsers decides which Unix account a replica runs as (DESIGN.md "Identity": replicas run as
// their job owner's account). The coordinator names the job's owner in LaunchReplica.owner (a
// cohort user: a client key's name, or with --insecure the user the client claimed); the agent
// maps it to an account with its `users` setting (--users alice=ualice,bob=bob; a user not listed
// maps to the account of the same name) and resolves that account on this node (getpwnam, its
// groups as initgroups would set them).
//
// Rules, in order:
//   - the agent does not run as root: it cannot switch users, so every replica runs as the
//     agent's own account (the agent says so once at start);
//   - no owner (a job stored before owners were recorded): the agent's own account, as before;
//   - the account does not exist on this node: the launch fails, naming the user, the account
//     and the node;
//   - the account is root (uid 0): refused unless `allow-root-users` lists the owner, or the agent
//     runs with --insecure (plaintext, local use: nobody is verified there, so a refusal would
//     protect nothing; there the whole cluster runs as whoever started it).
//
// Thread safety: const methods only (getpwnam_r/getgrouplist are reentrant).
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace cohort::agent {

// An account a replica runs as, resolved on this node.
struct RunAs {
  std::string user;     // the cohort user (the job's owner)
  std::string account;  // the Unix account
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups (the account's, gid included)
  std::string home;
};

struct ReplicaUserOptions {
  std::map<std::string, std::string> users;   // cohort user -> Unix account
  std::vector<std::string> allow_root_users;  // owners who may run as uid 0
  bool allow_root = false;                    // every owner may (--insecure)
};

class ReplicaUsers {
 public:
  // `can_switch`: this process may change users (it runs as root); `node_id` names this node in
  // errors.
  ReplicaUsers(ReplicaUserOptions options, std::string node_id, bool can_switch)
      : options_(std::move(options)), node_id_(std::move(node_id)), can_switch_(can_switch) {}

  // The account `owner`'s replicas run as here; nullopt: the agent's own (see the rules above).
  // FAILED_PRECONDITION when the account does not exist here; PERMISSION_DENIED when it is root
  // and root is not allowed for `owner`.
  StatusOr<std::optional<RunAs>> Resolve(const std::string& owner) const;

  bool can_switch() const { return can_switch_; }
  const ReplicaUserOptions& options() const { return options_; }

 private:
  ReplicaUserOptions options_;
  std::string node_id_;
  bool can_switch_;
};

// "alice=ualice, bob=bob" -> {alice: ualice, bob: bob}. INVALID_ARGUMENT naming `flag` for an item
// without '=' or with an empty side.
StatusOr<std::map<std::string, std::string>> ParseUserMap(const std::string& flag,
                                                          const std::string& text);

// Creates `path` and its missing parents (mode 0755); with `run_as`, the directories created
// from `owned_from` down (the path itself included when it is created) are chowned to it, so a
// replica running as that account can write there, and parents above stay the agent's.
// `owned_from` must be `path` or one of its ancestors (empty: only `path`). Only directories it
// made are chowned, never through a symbolic link: one that exists (perhaps a link the account
// planted) is left as it is.
Status MakeDirsOwnedBy(const std::string& path, const std::optional<RunAs>& run_as,
                       const std::string& owned_from = "");

}  // namespace cohort::agent
