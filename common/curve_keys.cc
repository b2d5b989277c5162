#include "common/curve_keys.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <vector>

#include "common/rate_limited_log.h"
#include "common/zmq_calls.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
constexpr size_t kZ85KeyLength = 40;

bool IsZ85Key(const std::string& key) {
  if (key.size() != kZ85KeyLength) return false;
  std::array<uint8_t, 32> raw;
  return zmq_z85_decode(raw.data(), key.c_str()) != nullptr;
}

std::string Trim(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

Status WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus("create " + path, errno);
  ssize_t n = ::write(fd, text.data(), text.size());
  int write_errno = errno;
  bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) return ErrnoStatus("write " + path, write_errno);
  if (!synced) return ErrnoStatus("fsync " + path, errno);
  return Status::Ok();
}

// Warnings about the files of a key directory, which is read on every handshake.
RateLimitedLog& KeyFileLog() {
  static RateLimitedLog log(spdlog::level::warn, "key file warnings", 5, std::chrono::minutes(1));
  return log;
}

// One ZMTP metadata property: name length (1 byte), name, value length (4 bytes, big endian),
// value.
std::string Property(const std::string& name, const std::string& value) {
  std::string out;
  out += static_cast<char>(name.size());
  out += name;
  uint32_t n = static_cast<uint32_t>(value.size());
  for (int shift : {24, 16, 8, 0}) out += static_cast<char>((n >> shift) & 0xff);
  out += value;
  return out;
}

}  // namespace

StatusOr<CurveKeyPair> GenerateCurveKeyPair() {
  char public_key[kZ85KeyLength + 1];
  char secret_key[kZ85KeyLength + 1];
  if (zmq_curve_keypair(public_key, secret_key) != 0) {
    return FailedPrecondition(std::string("zmq_curve_keypair: ") + zmq_strerror(zmq_errno()) +
                              " (libzmq built without CURVE?)");
  }
  return CurveKeyPair{public_key, secret_key};
}

Status WriteCurveKeyFiles(const std::string& dir, const std::string& name,
                          const CurveKeyPair& keys) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal("create directory " + dir + ": " + ec.message());
  std::string public_line = "public-key = " + keys.public_key + "\n";
  COHORT_RETURN_IF_ERROR(WriteFile(dir + "/" + name + ".key",
                                   public_line + "secret-key = " + keys.secret_key + "\n", 0600));
  return WriteFile(dir + "/" + name + ".pub", public_line, 0644);
}

StatusOr<CurveKeyPair> ReadCurveKeyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return ErrnoStatus("open key file " + path, errno);
  CurveKeyPair keys;
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument(path + ":" + std::to_string(line_number) +
                             ": expected 'name = value'");
    }
    std::string name = Trim(line.substr(0, eq));
    std::string value = Trim(line.substr(eq + 1));
    if (name != "public-key" && name != "secret-key") {
      return InvalidArgument(path + ":" + std::to_string(line_number) + ": unknown key '" + name +
                             "' (expected public-key or secret-key)");
    }
    if (!IsZ85Key(value)) {
      return InvalidArgument(path + ":" + std::to_string(line_number) + ": " + name +
                             " is not a 40-character Z85 CURVE key");
    }
    (name == "public-key" ? keys.public_key : keys.secret_key) = value;
  }
  if (keys.public_key.empty()) return InvalidArgument(path + ": no public-key line");
  return keys;
}

bool ListedKeys::Lists(const std::string& name, const std::string& key) const {
  auto it = name_of.find(key);
  return it != name_of.end() && it->second == name;
}

StatusOr<ListedKeys> ReadListedKeys(const std::string& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return Status(StatusCode::kNotFound, "key directory " + dir + ": " + ec.message());
  ListedKeys listed;
  std::set<std::string> ambiguous;
  for (const auto& entry : it) {
    auto ext = entry.path().extension();
    if (ext != ".pub" && ext != ".key") continue;
    auto pair = ReadCurveKeyFile(entry.path().string());
    if (!pair.ok()) {
      KeyFileLog().Log("skipping key file: {}", pair.status().ToString());
      continue;
    }
    std::string name = entry.path().stem().string();
    auto [at, added] = listed.name_of.emplace(pair->public_key, name);
    if (!added && at->second != name) {
      KeyFileLog().Log(
          "key directory {}: one key is listed as both '{}' and '{}'; it admits "
          "neither until one file goes",
          dir, at->second, name);
      ambiguous.insert(pair->public_key);
    }
  }
  for (const auto& key : ambiguous) listed.name_of.erase(key);
  return listed;
}

StatusOr<CurveKeyPair> LoadOwnKeys(const std::string& secret_key_file) {
  COHORT_ASSIGN_OR_RETURN(CurveKeyPair keys, ReadCurveKeyFile(secret_key_file));
  if (keys.secret_key.empty()) {
    return InvalidArgument(secret_key_file +
                           ": no secret-key line (a .pub file was given where "
                           "this side's .key file is needed)");
  }
  return keys;
}

StatusOr<std::string> LoadServerPublicKey(const std::string& server_key_file) {
  COHORT_ASSIGN_OR_RETURN(CurveKeyPair keys, ReadCurveKeyFile(server_key_file));
  return keys.public_key;
}

StatusOr<std::unique_ptr<ZapAuthenticator>> ZapAuthenticator::Start(
    zmq::context_t& context, std::map<std::string, std::string> domains) {
  for (const auto& [domain, dir] : domains) {
    auto keys = ReadListedKeys(dir);
    if (!keys.ok()) return keys.status().WithContext("ZAP domain " + domain);
    spdlog::info("ZAP domain '{}': {} allowed key(s) in {}", domain, keys->name_of.size(), dir);
  }
  try {
    zmq::socket_t socket(context, zmq::socket_type::rep);
    socket.set(zmq::sockopt::linger, 0);
    socket.bind("inproc://zeromq.zap.01");
    return std::unique_ptr<ZapAuthenticator>(
        new ZapAuthenticator(std::move(socket), std::move(domains)));
  } catch (const zmq::error_t& e) {
    return Internal(std::string("bind ZAP handler: ") + e.what());
  }
}

ZapAuthenticator::ZapAuthenticator(zmq::socket_t socket, std::map<std::string, std::string> domains)
    : socket_(std::move(socket)), domains_(std::move(domains)) {
  thread_ = std::thread([this] { Serve(); });
}

ZapAuthenticator::~ZapAuthenticator() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void ZapAuthenticator::LogRefusal(const std::string& domain, const std::string& key,
                                  const std::string& address, const std::string& dir) {
  constexpr size_t kMaxRemembered = 10'000;
  std::string peer = domain + " " + key + " " + address;
  if (refusals_logged_.count(peer)) return;
  if (refusals_logged_.size() < kMaxRemembered) {
    refusals_logged_.insert(peer);
    spdlog::warn("refused a {} connection from {}: its public key {} is not listed in {}", domain,
                 address, key, dir);
    return;
  }
  static RateLimitedLog overflow(spdlog::level::warn, "refused keys", 10, std::chrono::seconds(10));
  overflow.Log("refused a {} connection from {}: its public key {} is not listed in {}", domain,
               address, key, dir);
}

void ZapAuthenticator::Serve() {
  while (!stop_) {
    try {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (PollFrames(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
      std::vector<zmq::message_t> frames = RecvMultipart(socket_, zmq::recv_flags::none);
      // Request: version, request id, domain, address, identity, mechanism, credentials...
      std::string request_id = frames.size() > 1 ? frames[1].to_string() : "";
      std::string code = "400";
      std::string text = "malformed ZAP request";
      std::string user;
      std::string metadata;
      if (frames.size() >= 7 && frames[0].to_string() == "1.0") {
        std::string domain = frames[2].to_string();
        std::string address = frames[3].to_string();
        std::string mechanism = frames[5].to_string();
        auto it = domains_.find(domain);
        if (mechanism != "CURVE") {
          text = "mechanism " + mechanism + " not allowed";
        } else if (it == domains_.end()) {
          text = "unknown ZAP domain '" + domain + "'";
        } else if (frames[6].size() != 32) {
          text = "bad CURVE credentials";
        } else {
          char z85[kZ85KeyLength + 1];
          zmq_z85_encode(z85, static_cast<const uint8_t*>(frames[6].data()), 32);
          auto listed = ReadListedKeys(it->second);
          const std::string* name = nullptr;
          if (listed.ok()) {
            auto found = listed->name_of.find(z85);
            if (found != listed->name_of.end()) name = &found->second;
          }
          if (name != nullptr) {
            code = "200";
            text = "OK";
            user = *name;
            metadata = Property(kKeyProperty, z85);
          } else {
            text = "public key not listed";
            LogRefusal(domain, z85, address, it->second);
          }
        }
      }
      std::array<std::string, 6> reply = {"1.0", request_id, code, text, user, metadata};
      for (size_t i = 0; i < reply.size(); ++i) {
        zmq::message_t frame(reply[i].data(), reply[i].size());
        SendFrame(socket_, frame,
                  i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      spdlog::error("ZAP handler: {}", e.what());
    }
  }
}

}  // namespace cohort
