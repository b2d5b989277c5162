// PeerKeys is the coordinator's view of who may speak on its CURVE endpoints now. The ZAP handler
// (common/curve_keys.h) checks a key only at the handshake and names the connection by the key
// file that lists it (agents/<node-id>.pub, clients/<user>.pub); PeerKeys closes the sessions of
// keys removed since: Refresh() re-reads the key directories (the coordinator calls it every
// half heartbeat interval) and Check() is asked for every message, so a message whose key is no
// longer listed under its name is refused within one interval of the file's removal (or
// replacement by another key). With --insecure there are no keys, no PeerKeys, and nothing is
// checked.
//
// Thread safety: none; the coordinator loop calls it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "common/curve_keys.h"
#include "common/messaging.h"
#include "common/status.h"

namespace cohort::coordinator {

class PeerKeys {
 public:
  // `dirs`: ZAP domain ("clients", "agents") -> its key directory. Reads them once.
  explicit PeerKeys(std::map<std::string, std::string> dirs);

  // Re-reads every directory; one that cannot be read keeps its last listing (with a warning).
  void Refresh();
  // OK when `identity`'s key is listed in `domain`'s directory under identity.user; else
  // UNAUTHENTICATED naming the file that should list it. A key not in the listing read last (one
  // added since) has its directory read again, once per key between two Refresh() calls.
  Status Check(const std::string& domain, const PeerIdentity& identity);

 private:
  void Read(const std::string& domain, const std::string& dir);

  std::map<std::string, std::string> dirs_;
  std::map<std::string, ListedKeys> listed_;  // by domain
  std::set<std::string> missing_;             // "domain key name" refused after a fresh read
};

}  // namespace cohort::coordinator
