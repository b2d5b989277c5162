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
// The public keys of every *.pub and *.key file in `dir` (an unreadable or malformed file is
// skipped with a warning naming it).
StatusOr<std::set<std::string>> ReadPublicKeyDir(const std::string& dir);

// Default key locations, used when a flag does not name a file.
inline constexpr char kDefaultKeyDir[] = "/etc/cohort";

// What a client or agent needs to talk to a CURVE coordinator: its own key pair (a .key file)
// and the coordinator's public key (a .pub or .key file). Errors name the file.
StatusOr<CurveKeyPair> LoadOwnKeys(const std::string& secret_key_file);
StatusOr<std::string> LoadServerPublicKey(const std::string& server_key_file);

// Serves ZeroMQ's ZAP protocol (inproc://zeromq.zap.01) for one context on its own thread.
// Each CURVE handshake on a socket whose ZAP domain is a key of `domains` is accepted only when
// the client's public key is in that domain's directory. Directories are re-read on every
// handshake, so adding or removing a key file takes effect without a restart. Other mechanisms
// and unknown domains are refused.
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

  zmq::socket_t socket_;
  std::map<std::string, std::string> domains_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace cohort
