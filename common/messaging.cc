#include "common/messaging.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "common/rate_limited_log.h"
#include "common/utf8.h"
#include "common/zmq_calls.h"

namespace cohort {
namespace {

using SteadyClock = std::chrono::steady_clock;

Status ZmqError(std::string_view what, const zmq::error_t& e) {
  return Unavailable(std::string(what) + ": " + e.what());
}

Status ApplyCommonOptions(zmq::socket_t& socket, const SocketSecurity& security, bool server) {
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::maxmsgsize, kMaxFrameBytes);
  if (security.insecure) return Status::Ok();
  if (security.keys.secret_key.empty()) {
    return InvalidArgument("CURVE needs this side's secret key (a .key file), or --insecure");
  }
  if (server) {
    if (security.zap_domain.empty()) return InvalidArgument("CURVE server needs a ZAP domain");
    socket.set(zmq::sockopt::curve_server, 1);
    socket.set(zmq::sockopt::curve_secretkey, security.keys.secret_key);
    socket.set(zmq::sockopt::zap_domain, security.zap_domain);
  } else {
    if (security.server_public_key.empty()) {
      return InvalidArgument("CURVE client needs the coordinator's public key, or --insecure");
    }
    socket.set(zmq::sockopt::curve_serverkey, security.server_public_key);
    socket.set(zmq::sockopt::curve_publickey, security.keys.public_key);
    socket.set(zmq::sockopt::curve_secretkey, security.keys.secret_key);
  }
  return Status::Ok();
}

// Waits up to `timeout` for `socket` to become readable (a signal may end the wait sooner).
Status WaitIn(zmq::socket_t& socket, std::chrono::milliseconds timeout) {
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  try {
    PollFrames(&item, 1, timeout);
    return Status::Ok();
  } catch (const zmq::error_t& e) {
    return ZmqError("poll", e);
  }
}

// Warnings about frames that do not verify, shared by every socket of the process.
RateLimitedLog& BadFrameLog() {
  static RateLimitedLog log(spdlog::level::warn, "bad frames", 10, std::chrono::seconds(10));
  return log;
}

// What the ZAP handler said of the connection `frame` came on (empty without CURVE).
PeerIdentity IdentityOf(zmq::message_t& frame) {
  PeerIdentity identity;
  if (const char* user = zmq_msg_gets(frame.handle(), "User-Id")) {
    identity.user = user;
  }
  if (const char* key = zmq_msg_gets(frame.handle(), kKeyProperty)) identity.key = key;
  return identity;
}

// Receives every frame of one multipart message.
StatusOr<std::vector<zmq::message_t>> ReceiveMultipart(zmq::socket_t& socket) {
  try {
    return RecvMultipart(socket, zmq::recv_flags::dontwait);
  } catch (const zmq::error_t& e) {
    return ZmqError("recv", e);
  }
}

}  // namespace

std::string PeerName(const std::string& peer) {
  bool printable = !peer.empty() && std::all_of(peer.begin(), peer.end(), [](unsigned char c) {
    return c >= 0x21 && c < 0x7f;
  });
  if (printable) return peer;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex = "0x";
  for (unsigned char c : peer) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  return hex;
}

zmq::message_t EncodeBody(uint64_t request_id, wire::BodyUnion body, const std::string& user) {
  flatbuffers::FlatBufferBuilder builder(256);
  wire::EnvelopeT envelope;
  envelope.version = kProtocolVersion;
  envelope.request_id = request_id;
  envelope.body = std::move(body);
  envelope.user = user;
  builder.Finish(wire::Envelope::Pack(builder, &envelope), wire::EnvelopeIdentifier());
  return zmq::message_t(builder.GetBufferPointer(), builder.GetSize());
}

zmq::message_t EncodeError(uint64_t request_id, const Status& status) {
  wire::ErrorReplyT error;
  error.code = static_cast<int>(status.code());
  error.message = status.message();
  return Encode(request_id, std::move(error));
}

Status StatusFromError(const wire::ErrorReply& error) {
  int code = error.code();
  if (code <= 0 || code > static_cast<int>(StatusCode::kUnauthenticated)) {
    code = static_cast<int>(StatusCode::kInternal);
  }
  return Status(static_cast<StatusCode>(code),
                error.message() ? error.message()->str() : std::string("(no message)"));
}

StatusOr<Message> Message::Parse(zmq::message_t frame) {
  const auto* data = static_cast<const uint8_t*>(frame.data());
  size_t size = frame.size();
  if (size < 8) {
    return DataLoss("frame of " + std::to_string(size) + " bytes is too short for an envelope");
  }
  if (!flatbuffers::BufferHasIdentifier(data, wire::EnvelopeIdentifier())) {
    return DataLoss("frame is not a Cohort envelope (identifier mismatch)");
  }
  flatbuffers::Verifier verifier(data, size);
  if (!wire::VerifyEnvelopeBuffer(verifier)) {
    return DataLoss("envelope failed FlatBuffers verification");
  }
  const wire::Envelope* envelope = wire::GetEnvelope(data);
  if (envelope->version() != kProtocolVersion) {
    return InvalidArgument("protocol version " + std::to_string(envelope->version()) +
                           " is not supported (this side speaks " +
                           std::to_string(kProtocolVersion) + ")");
  }
  if (envelope->body_type() == wire::Body::NONE || envelope->body() == nullptr) {
    return DataLoss("envelope has no body");
  }
  // The user a plaintext client claims becomes a job's owner, stored and shown.
  if (const flatbuffers::String* user = envelope->user()) {
    COHORT_RETURN_IF_ERROR(
        CheckPrintableText(user->string_view(), kMaxClaimedUserBytes, "Envelope.user"));
  }
  return Message(std::move(frame), envelope);
}

Status Message::ErrorStatus() const {
  if (const auto* error = As<wire::ErrorReply>()) return StatusFromError(*error);
  return Status::Ok();
}

StatusOr<SocketSecurity> CurveClientSecurity(const std::string& key_file,
                                             const std::string& server_key_file) {
  if (key_file.empty() || server_key_file.empty()) {
    return InvalidArgument(
        "CURVE needs this side's key file and the coordinator's public key file (or --insecure)");
  }
  SocketSecurity security;
  security.insecure = false;
  auto keys = LoadOwnKeys(key_file);
  if (!keys.ok()) {
    return keys.status().WithContext(
        "key file (create one with `cohort keygen`, or use --insecure)");
  }
  security.keys = std::move(*keys);
  auto server = LoadServerPublicKey(server_key_file);
  if (!server.ok()) return server.status().WithContext("coordinator public key");
  security.server_public_key = std::move(*server);
  return security;
}

StatusOr<RouterSocket> RouterSocket::Bind(zmq::context_t& context, const std::string& endpoint,
                                          const SocketSecurity& security) {
  try {
    zmq::socket_t socket(context, zmq::socket_type::router);
    COHORT_RETURN_IF_ERROR(ApplyCommonOptions(socket, security, /*server=*/true));
    // A reconnecting agent keeps its node-id identity; let the new connection take it over.
    socket.set(zmq::sockopt::router_handover, 1);
    socket.set(zmq::sockopt::router_mandatory, 1);
    // Every agent of a large cluster connects at once when the coordinator (re)starts: with
    // ZeroMQ's default listen backlog of 100 most of their SYNs are dropped and retried seconds
    // later (10,000 simulated agents took 34 s to register). The kernel caps it at somaxconn.
    socket.set(zmq::sockopt::backlog, kListenBacklog);
    socket.bind(endpoint);
    return RouterSocket(std::move(socket));
  } catch (const zmq::error_t& e) {
    return InvalidArgument("cannot bind " + endpoint + ": " + e.what());
  }
}

std::string RouterSocket::endpoint() const {
  try {
    return socket_.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t&) {
    return "";
  }
}

StatusOr<std::optional<Incoming>> RouterSocket::Next() {
  COHORT_ASSIGN_OR_RETURN(auto frames, ReceiveMultipart(socket_));
  if (frames.empty()) return std::optional<Incoming>();
  std::string peer = frames[0].to_string();
  if (frames.size() != 2) {
    return std::optional<Incoming>(
        Incoming{std::move(peer),
                 DataLoss("expected exactly one frame per message, got " +
                          std::to_string(frames.size() - 1)),
                 PeerIdentity{}});
  }
  PeerIdentity identity = IdentityOf(frames[1]);
  return std::optional<Incoming>(
      Incoming{std::move(peer), Message::Parse(std::move(frames[1])), std::move(identity)});
}

StatusOr<std::optional<RoutedMessage>> RouterSocket::Receive(std::chrono::milliseconds timeout) {
  auto deadline = SteadyClock::now() + timeout;
  while (true) {
    COHORT_ASSIGN_OR_RETURN(auto incoming, Next());
    if (!incoming) {
      auto remaining =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
      if (remaining.count() <= 0) return std::optional<RoutedMessage>();
      COHORT_RETURN_IF_ERROR(WaitIn(socket_, remaining));
      continue;
    }
    if (!incoming->message.ok()) {
      BadFrameLog().Log("refusing a bad frame from peer {}: {}", PeerName(incoming->peer),
                        incoming->message.status().ToString());
      (void)Send(incoming->peer, EncodeError(0, incoming->message.status()));
      continue;
    }
    return std::optional<RoutedMessage>(RoutedMessage{
        std::move(incoming->peer), std::move(*incoming->message), std::move(incoming->identity)});
  }
}

Status RouterSocket::Send(const std::string& peer, zmq::message_t frame) {
  try {
    zmq::message_t identity(peer.data(), peer.size());
    if (!SendFrame(socket_, identity, zmq::send_flags::sndmore | zmq::send_flags::dontwait) ||
        !SendFrame(socket_, frame, zmq::send_flags::dontwait)) {
      return Unavailable("send to peer would block");
    }
    return Status::Ok();
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return Unavailable("peer is not connected");
    return ZmqError("send", e);
  }
}

StatusOr<DealerSocket> DealerSocket::Connect(zmq::context_t& context, const std::string& endpoint,
                                             const std::string& identity,
                                             const SocketSecurity& security) {
  try {
    zmq::socket_t socket(context, zmq::socket_type::dealer);
    COHORT_RETURN_IF_ERROR(ApplyCommonOptions(socket, security, /*server=*/false));
    if (!identity.empty()) socket.set(zmq::sockopt::routing_id, identity);
    socket.set(zmq::sockopt::reconnect_ivl, 100);
    socket.set(zmq::sockopt::reconnect_ivl_max, 2000);
    std::unique_ptr<zmq::socket_t> monitor;
    if (!security.insecure) {
      // Handshake outcomes, so a refused key is told apart from a coordinator that is not there.
      static std::atomic<uint64_t> monitors{0};
      std::string name = "inproc://cohort-dealer-handshakes-" + std::to_string(++monitors);
      if (zmq_socket_monitor(socket.handle(), name.c_str(),
                             ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED) !=
          0) {
        return Internal("socket monitor: " + std::string(zmq_strerror(zmq_errno())));
      }
      monitor = std::make_unique<zmq::socket_t>(context, zmq::socket_type::pair);
      monitor->set(zmq::sockopt::linger, 0);
      monitor->connect(name);
    }
    socket.connect(endpoint);
    return DealerSocket(std::move(socket), std::move(monitor), endpoint,
                        security.insecure ? "" : security.keys.public_key);
  } catch (const zmq::error_t& e) {
    return InvalidArgument("cannot connect to " + endpoint + ": " + e.what());
  }
}

Status DealerSocket::Send(zmq::message_t frame) {
  try {
    if (!SendFrame(socket_, frame, zmq::send_flags::dontwait)) {
      return Unavailable("send queue to the coordinator is full");
    }
    return Status::Ok();
  } catch (const zmq::error_t& e) {
    return ZmqError("send", e);
  }
}

void DealerSocket::ReadHandshakeEvents() {
  if (!monitor_) return;
  try {
    while (true) {
      zmq::message_t event, address;
      if (!RecvFrame(*monitor_, event, zmq::recv_flags::dontwait)) return;
      if (event.more()) (void)RecvFrame(*monitor_, address, zmq::recv_flags::dontwait);
      if (event.size() < 6) continue;
      uint16_t id;
      uint32_t value;
      std::memcpy(&id, event.data(), sizeof id);
      std::memcpy(&value, static_cast<const char*>(event.data()) + 2, sizeof value);
      if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) refused_ = false;
      // ZAP status 400: the key is not listed. (300 and 500 are the server's own trouble.)
      if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH && value == 400) {
        refused_ = true;
        refused_at_ = SteadyClock::now();
      }
    }
  } catch (const zmq::error_t&) {
    // A monitor that fails leaves calls to time out as before.
  }
}

void DealerSocket::RetryIfRefused(std::chrono::milliseconds after) {
  ReadHandshakeEvents();
  if (!refused_ || SteadyClock::now() - refused_at_ < after) return;
  try {
    socket_.disconnect(endpoint_);
    socket_.connect(endpoint_);
    refused_ = false;  // until this handshake is refused too
  } catch (const zmq::error_t& e) {
    spdlog::debug("reconnecting to {}: {}", endpoint_, e.what());
  }
}

Status DealerSocket::KeyStatus() {
  ReadHandshakeEvents();
  if (!refused_) return Status::Ok();
  return Unauthenticated("the coordinator at " + endpoint_ +
                         " refused this key (not listed): public key " + public_key_ +
                         "; its admin lists a key by putting its .pub file in the coordinator's "
                         "key directory");
}

Status DealerSocket::WaitReadable(std::chrono::milliseconds timeout, bool* readable) {
  zmq::pollitem_t items[2] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                              {monitor_ ? monitor_->handle() : nullptr, 0, ZMQ_POLLIN, 0}};
  try {
    PollFrames(items, monitor_ ? 2 : 1, std::max(timeout, std::chrono::milliseconds(0)));
  } catch (const zmq::error_t& e) {
    return ZmqError("poll", e);
  }
  if (monitor_ && (items[1].revents & ZMQ_POLLIN)) ReadHandshakeEvents();
  *readable = (items[0].revents & ZMQ_POLLIN) != 0;
  return Status::Ok();
}

StatusOr<std::optional<Message>> DealerSocket::Receive(std::chrono::milliseconds timeout) {
  static RateLimitedLog refusals(spdlog::level::warn, "refusals of this key", 1,
                                 std::chrono::seconds(60));
  auto deadline = SteadyClock::now() + timeout;
  while (true) {
    auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    bool readable = false;
    COHORT_RETURN_IF_ERROR(WaitReadable(remaining, &readable));
    if (Status key = KeyStatus(); !key.ok()) {
      refusals.Log("{}", key.message());
      RetryIfRefused(std::chrono::seconds(5));
    }
    if (!readable) {
      if (remaining.count() <= 0) return std::optional<Message>();
      continue;
    }
    COHORT_ASSIGN_OR_RETURN(auto frames, ReceiveMultipart(socket_));
    if (frames.size() != 1) continue;
    auto message = Message::Parse(std::move(frames[0]));
    if (!message.ok()) {
      BadFrameLog().Log("dropping a bad frame from the coordinator: {}",
                        message.status().ToString());
      continue;
    }
    return std::optional<Message>(std::move(*message));
  }
}

StatusOr<Message> DealerSocket::AwaitReply(uint64_t request_id, std::chrono::milliseconds timeout) {
  auto deadline = SteadyClock::now() + timeout;
  while (true) {
    COHORT_RETURN_IF_ERROR(KeyStatus());
    auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (remaining.count() <= 0) {
      return Unavailable("no reply from the coordinator within " + std::to_string(timeout.count()) +
                         " ms");
    }
    bool readable = false;
    COHORT_RETURN_IF_ERROR(WaitReadable(remaining, &readable));
    if (!readable) continue;
    COHORT_ASSIGN_OR_RETURN(auto message, Receive(std::chrono::milliseconds(0)));
    if (!message) continue;
    if (message->request_id() != request_id && message->request_id() != 0) continue;
    COHORT_RETURN_IF_ERROR(message->ErrorStatus());
    return std::move(*message);
  }
}

}  // namespace cohort
