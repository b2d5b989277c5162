#include "agent/replica_user.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace cohort::agent {

namespace fs = std::filesystem;

StatusOr<std::optional<RunAs>> ReplicaUsers::Resolve(const std::string& owner) const {
  if (!can_switch_ || owner.empty()) return std::optional<RunAs>();
  auto mapped = options_.users.find(owner);
  const std::string account = mapped == options_.users.end() ? owner : mapped->second;
  std::string via = mapped == options_.users.end() ? "" : " (the agent's users setting)";

  struct passwd pw;
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  int err = getpwnam_r(account.c_str(), &pw, buf.data(), buf.size(), &found);
  if (err != 0) {
    return Unavailable("node " + node_id_ + ": cannot look up the Unix account '" + account +
                       "' of user " + owner + ": " + std::strerror(err));
  }
  if (found == nullptr) {
    return FailedPrecondition("user " + owner + " has no Unix account '" + account + "' on node " +
                              node_id_ + via +
                              ": create it there or map the user to an account with the agent's "
                              "users setting (--users " +
                              owner + "=ACCOUNT)");
  }
  RunAs run_as;
  run_as.user = owner;
  run_as.account = account;
  run_as.uid = pw.pw_uid;
  run_as.gid = pw.pw_gid;
  run_as.home = pw.pw_dir ? pw.pw_dir : "";
  if (run_as.uid == 0) {
    const auto& allowed = options_.allow_root_users;
    if (!options_.allow_root && std::find(allowed.begin(), allowed.end(), owner) == allowed.end()) {
      return PermissionDenied("user " + owner + " maps to the Unix account '" + account +
                              "' (uid 0, root) on node " + node_id_ +
                              ": the agent runs no replica as root unless its allow-root-users "
                              "setting lists the user");
    }
  }
  int count = 64;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  while (getgrouplist(account.c_str(), run_as.gid, groups.data(), &count) < 0) {
    if (count > 65536) return Internal("user " + owner + ": too many groups");
    groups.resize(static_cast<size_t>(count) * 2);
    count *= 2;
  }
  groups.resize(static_cast<size_t>(count));
  run_as.groups = std::move(groups);
  return std::optional<RunAs>(std::move(run_as));
}

StatusOr<std::map<std::string, std::string>> ParseUserMap(const std::string& flag,
                                                          const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string item;
  auto trim = [](std::string s) {
    size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  while (std::getline(in, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    std::string user = eq == std::string::npos ? "" : trim(item.substr(0, eq));
    std::string account = eq == std::string::npos ? "" : trim(item.substr(eq + 1));
    if (user.empty() || account.empty()) {
      return InvalidArgument("--" + flag + ": expected USER=ACCOUNT, got '" + item + "'");
    }
    out[user] = account;
  }
  return out;
}

Status MakeDirsOwnedBy(const std::string& path, const std::optional<RunAs>& run_as,
                       const std::string& owned_from) {
  fs::path target = fs::path(path).lexically_normal();
  fs::path from = owned_from.empty() ? target : fs::path(owned_from).lexically_normal();
  if (!target.empty() && target.filename().empty()) target = target.parent_path();
  if (!from.empty() && from.filename().empty()) from = from.parent_path();
  // The ancestors of `target`, outermost first.
  std::vector<fs::path> chain;
  for (fs::path p = target; !p.empty() && p != p.root_path(); p = p.parent_path()) {
    chain.push_back(p);
  }
  std::reverse(chain.begin(), chain.end());
  bool owned = false;
  for (const fs::path& dir : chain) {
    if (dir == from) owned = true;
    if (::mkdir(dir.c_str(), 0755) != 0) {
      if (errno == EEXIST) continue;
      return ErrnoStatus("mkdir " + dir.string(), errno);
    }
    // lchown: a directory made here is in one the account already owns, where it could be
    // swapped for a link between the mkdir and this call; chown would follow that link.
    if (owned && run_as && ::lchown(dir.c_str(), run_as->uid, run_as->gid) != 0) {
      return ErrnoStatus("chown " + dir.string() + " to " + run_as->account, errno);
    }
  }
  return Status::Ok();
}

}  // namespace cohort::agent
