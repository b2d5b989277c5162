// CURVE key pairs for ZeroMQ security (DESIGN.md "The wire"): generation, key files, and the
// ZAP authenticator that lets the coordinator accept only listed public keys.
//
// Key files are text. NAME.key (mode 0600) holds both halves:
//   public-key = <40 Z85 chars>
//   secret-key = <40 Z85 chars>
// NAME.pub holds only the public-key line; that is the file an admin copies into the
// coordinator's clients/ or agents/ directory, or to clients as the coordinator's key.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "common/status.h"

namespace cohort {

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 chars
  std::string secret_key;  // Z85, 40 chars; empty when loaded from a .pub file
};

StatusOr<CurveKeyPair> GenerateCurveKeyPair();
// Writes DIR/NAME.key (0600) and DIR/NAME.pub, refusing to overwrite existing files.
Status WriteCurveKeyFiles(const std::string& dir, const std::string& name,
                          const CurveKeyPair& keys);
// Reads a .key or .pub file; errors name the file and line.
StatusOr<CurveKeyPair> ReadCurveKeyFile(const std::string& path);
// The keys a key directory (the coordinator's clients/ or agents/) lists: every *.pub and *.key
// file, each naming its key's holder by the file's name without the extension
// (agents/node-7.pub: node "node-7"; clients/alice.pub: user "alice"). A key listed under two
// names admits neither (a warning names both); a file that does not parse is skipped with a
// warning naming it.
struct ListedKeys {
  std::map<std::string, std::string> name_of;  // public key (Z85) -> name
  // True when `key` is listed, under `name`.
  bool Lists(const std::string& name, const std::string& key) const;
};
StatusOr<ListedKeys> ReadListedKeys(const std::string& dir);

// What the ZapAuthenticator tells ZeroMQ of each connection it admits, readable on every message
// received from it (zmq_msg_gets): the "User-Id" property is the name its key is listed under,
// and this property holds the key itself (Z85).
inline constexpr char kKeyProperty[] = "X-Cohort-Key";

// Default key locations, used when a flag does not name a file.
inline constexpr char kDefaultKeyDir[] = "/etc/cohort";

// What a client or agent needs to talk to a CURVE coordinator: its own key pair (a .key file)
// and the coordinator's public key (a .pub or .key file). Errors name the file.
StatusOr<CurveKeyPair> LoadOwnKeys(const std::string& secret_key_file);
StatusOr<std::string> LoadServerPublicKey(const std::string& server_key_file);

// Serves ZeroMQ's ZAP protocol (inproc://zeromq.zap.01) for one context on its own thread.
// Each CURVE handshake on a socket whose ZAP domain is a key of `domains` is accepted only when
// the client's public key is listed in that domain's directory (ReadListedKeys), and the
// connection is then named by it: User-Id = the name, kKeyProperty = the key. Directories are
// re-read on every handshake, so a key added is admitted without a restart; a key removed is
// refused at its next handshake (ending a live session is the server's part: the coordinator
// re-checks the keys of its peers). Other mechanisms and unknown domains are refused. Each
// refused key is logged once per domain and peer address, with the key.
//
// Lifetime: create before binding the sockets it guards, destroy before the context.
class ZapAuthenticator {
 public:
  // domains: ZAP domain -> directory of allowed public keys.
  static StatusOr<std::unique_ptr<ZapAuthenticator>> Start(
      zmq::context_t& context, std::map<std::string, std::string> domains);
  ~ZapAuthenticator();

  ZapAuthenticator(const ZapAuthenticator&) = delete;
  ZapAuthenticator& operator=(const ZapAuthenticator&) = delete;

 private:
  ZapAuthenticator(zmq::socket_t socket, std::map<std::string, std::string> domains);
  void Serve();
  void LogRefusal(const std::string& domain, const std::string& key, const std::string& address,
                  const std::string& dir);

  zmq::socket_t socket_;
  std::map<std::string, std::string> domains_;
  std::set<std::string> refusals_logged_;  // domain, key, address; the ZAP thread's own
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace cohort
