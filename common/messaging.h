// ZeroMQ messaging between the coordinator, agents and clients (DESIGN.md "The wire").
// A message is one frame holding a FlatBuffers Envelope (common/schema/cohort.fbs). Message owns
// the received bytes and is only ever built from a frame that passed flatbuffers::Verifier, the
// identifier check and the protocol version check, so handlers may read every field.
//
// RouterSocket::Next (the coordinator's loop) reads one message at a time and hands back a frame
// that does not verify with the reason, for the caller to answer or drop; RouterSocket::Receive
// answers such frames with ErrorReply(DATA_LOSS) itself. DealerSocket (agents, clients) drops
// them. Warnings about bad frames are rate-limited (common/rate_limited_log.h).
// cppzmq exceptions are caught here and become Status; a signal fails no call (common/zmq_calls.h).
// Sockets are not thread-safe: use each from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/schema/cohort_generated.h"
#include "common/status.h"

namespace cohort {

inline constexpr uint16_t kProtocolVersion = 1;
// Frames larger than this are refused (ZMQ_MAXMSGSIZE) before they reach us.
inline constexpr int64_t kMaxFrameBytes = 64ll << 20;
// The longest user name an envelope may claim.
inline constexpr size_t kMaxClaimedUserBytes = 255;
// The longest node id, address, port domain or version a RegisterAgent may carry (printable
// UTF-8: the coordinator refuses others, and the agent checks its flags against the same).
inline constexpr size_t kMaxNodeNameBytes = 255;
// A RouterSocket's listen backlog: connections not yet accepted (ZeroMQ's default is 100).
inline constexpr int kListenBacklog = 4096;

// Builds one encoded Envelope frame from an object-API body: Encode(id, wire::JobInfoT{...}).
// `user`: Envelope.user, the user a client claims (empty: none).
zmq::message_t EncodeBody(uint64_t request_id, wire::BodyUnion body, const std::string& user = "");
template <typename T>
zmq::message_t Encode(uint64_t request_id, T body, const std::string& user = "") {
  wire::BodyUnion u;
  u.Set(std::move(body));
  return EncodeBody(request_id, std::move(u), user);
}
zmq::message_t EncodeError(uint64_t request_id, const Status& status);
// A non-OK Status from an ErrorReply body.
Status StatusFromError(const wire::ErrorReply& error);

// A verified message.
class Message {
 public:
  // Verifies the frame: size, identifier, flatbuffers::Verifier, version, a body present, and a
  // claimed user (Envelope.user) of printable UTF-8 of at most kMaxClaimedUserBytes.
  static StatusOr<Message> Parse(zmq::message_t frame);

  const wire::Envelope& envelope() const { return *envelope_; }
  uint64_t request_id() const { return envelope_->request_id(); }
  // Envelope.user: who the sender claims to be (unverified; empty when it says nothing).
  std::string claimed_user() const {
    return envelope_->user() ? envelope_->user()->str() : std::string();
  }
  wire::Body type() const { return envelope_->body_type(); }
  // The body as T, or nullptr when it is another type.
  template <typename T>
  const T* As() const {
    return envelope_->body_as<T>();
  }
  // An ErrorReply turned into its Status; OK for any other body.
  Status ErrorStatus() const;

 private:
  Message(zmq::message_t frame, const wire::Envelope* envelope)
      : frame_(std::move(frame)), envelope_(envelope) {}
  zmq::message_t frame_;
  const wire::Envelope* envelope_;
};

// Security for one socket. insecure: plaintext (local use only). Otherwise CURVE: a ROUTER is
// a CURVE server with `keys.secret_key` and admits the clients its ZapAuthenticator
// (common/curve_keys.h) allows for `zap_domain`; a DEALER presents `keys` and refuses any
// coordinator whose key is not `server_public_key` (the handshake never completes, so calls
// time out as kUnavailable).
struct SocketSecurity {
  bool insecure = true;
  CurveKeyPair keys;
  std::string server_public_key;  // DEALER only
  std::string zap_domain;         // ROUTER only
};

// CURVE security for a DEALER from key files: this side's NAME.key and the coordinator's public
// key file. Errors name the file and say what to do (`cohort keygen`, or --insecure).
StatusOr<SocketSecurity> CurveClientSecurity(const std::string& key_file,
                                             const std::string& server_key_file);

// Who sent a message over CURVE, as the ZapAuthenticator named its connection
// (common/curve_keys.h): `user` is the name its key is listed under (agents/<node-id>.pub: the
// node id; clients/<user>.pub: the user), `key` the key (Z85). Both empty on a plaintext
// (--insecure) socket, where nobody is authenticated.
struct PeerIdentity {
  std::string user;
  std::string key;
};

struct RoutedMessage {
  std::string peer;  // ROUTER identity of the sender
  Message message;
  PeerIdentity identity;
};

// One message read by RouterSocket::Next: its sender and the verified message, or why the frame
// was refused (kDataLoss: not one verified envelope frame; kInvalidArgument: a protocol version
// this side does not speak).
struct Incoming {
  std::string peer;
  StatusOr<Message> message;
  PeerIdentity identity;
};

// A ROUTER identity for log lines: as is when printable, else hex.
std::string PeerName(const std::string& peer);

// The coordinator's end: binds, receives from many DEALERs, replies by identity.
class RouterSocket {
 public:
  static StatusOr<RouterSocket> Bind(zmq::context_t& context, const std::string& endpoint,
                                     const SocketSecurity& security = {});
  // The next message waiting, read without blocking; nullopt when none is. One call reads one
  // message (all its frames) and does nothing else: a refused frame comes back with its reason.
  StatusOr<std::optional<Incoming>> Next();
  // The next verified message, or nullopt when `timeout` passes first. Bad frames are answered
  // with ErrorReply and skipped.
  StatusOr<std::optional<RoutedMessage>> Receive(std::chrono::milliseconds timeout);
  Status Send(const std::string& peer, zmq::message_t frame);
  // The endpoint actually bound (resolves tcp://*:0 to the chosen port).
  std::string endpoint() const;
  zmq::socket_t& socket() { return socket_; }

 private:
  explicit RouterSocket(zmq::socket_t socket) : socket_(std::move(socket)) {}
  zmq::socket_t socket_;
};

// An agent's or client's end: one connection to the coordinator, reconnected by ZeroMQ.
// With CURVE it watches its own handshakes (a ZeroMQ socket monitor): when the coordinator refuses
// this side's key (ZAP status 400: not listed), Call returns kUnauthenticated at once, saying so
// and naming the key, instead of waiting out its timeout; Receive logs it (rate-limited) and goes
// on waiting. ZeroMQ does not reconnect after a refusal, so this socket does, in case an admin
// has listed the key since: a Call at least 1 s after the refusal, Receive every 5 s.
class DealerSocket {
 public:
  // `identity`, when not empty, is the ZMQ routing id (agents use their node id).
  static StatusOr<DealerSocket> Connect(zmq::context_t& context, const std::string& endpoint,
                                        const std::string& identity = "",
                                        const SocketSecurity& security = {});
  Status Send(zmq::message_t frame);
  // The next verified message, or nullopt when `timeout` passes first.
  StatusOr<std::optional<Message>> Receive(std::chrono::milliseconds timeout);
  // Sends a request with a fresh request id and waits for the reply carrying that id (others
  // are dropped). An ErrorReply becomes its Status; no reply in time is kUnavailable.
  template <typename T>
  StatusOr<Message> Call(T body, std::chrono::milliseconds timeout) {
    RetryIfRefused(std::chrono::seconds(1));
    uint64_t id = next_request_id_++;
    COHORT_RETURN_IF_ERROR(Send(Encode(id, std::move(body), claimed_user_)));
    return AwaitReply(id, timeout);
  }
  uint64_t NextRequestId() { return next_request_id_++; }
  // The user Call's requests claim (Envelope.user): what a plaintext coordinator takes as the
  // caller's user. Empty: none.
  void set_claimed_user(std::string user) { claimed_user_ = std::move(user); }
  zmq::socket_t& socket() { return socket_; }
  // kUnauthenticated while the coordinator's latest answer to this side's handshake was a
  // refusal of its key; OK otherwise (and always without CURVE).
  Status KeyStatus();

 private:
  DealerSocket(zmq::socket_t socket, std::unique_ptr<zmq::socket_t> monitor, std::string endpoint,
               std::string public_key)
      : socket_(std::move(socket)),
        monitor_(std::move(monitor)),
        endpoint_(std::move(endpoint)),
        public_key_(std::move(public_key)) {}
  StatusOr<Message> AwaitReply(uint64_t request_id, std::chrono::milliseconds timeout);
  // Waits until the socket (or the monitor) is readable, or `timeout`; reads monitor events.
  Status WaitReadable(std::chrono::milliseconds timeout, bool* readable);
  void ReadHandshakeEvents();
  // Connects again when the key was refused at least `after` ago.
  void RetryIfRefused(std::chrono::milliseconds after);
  zmq::socket_t socket_;
  std::unique_ptr<zmq::socket_t> monitor_;  // handshake events (CURVE only)
  std::string endpoint_;
  std::string public_key_;
  bool refused_ = false;
  std::chrono::steady_clock::time_point refused_at_;
  uint64_t next_request_id_ = 1;
  std::string claimed_user_;
};

}  // namespace cohort
