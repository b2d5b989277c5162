#include "common/http_server.h"

#include <httplib.h>

#include <charconv>
#include <chrono>
#include <exception>

namespace cohort {

struct HttpServer::Impl {
  httplib::Server server;
};

std::string HttpEndpoint::ToString() const {
  if (!enabled) return "none";
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

StatusOr<HttpEndpoint> ParseHttpEndpoint(std::string_view text) {
  HttpEndpoint e;
  if (text == "none") return e;
  auto bad = [&](const std::string& why) {
    return InvalidArgument("HTTP endpoint '" + std::string(text) + "': " + why +
                           " (expected HOST:PORT, [IPV6]:PORT or none)");
  };
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad("unclosed [ or no port");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return bad("an IPv6 address needs [ ]");
  }
  if (host.empty()) return bad("no host");
  int p = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p < 0 || p > 65535) {
    return bad("the port is not a number in 0-65535");
  }
  e.enabled = true;
  e.host = std::string(host);
  e.port = p;
  return e;
}

bool IsLoopbackHost(std::string_view host) {
  return host == "localhost" || host == "::1" || host.substr(0, 4) == "127.";
}

std::string HttpRequest::Param(const std::string& key, const std::string& fallback) const {
  auto it = params.find(key);
  return it == params.end() ? fallback : it->second;
}

HttpServer::~HttpServer() {
  if (impl_) impl_->server.stop();
  if (thread_.joinable()) thread_.join();
}

std::string HttpServer::url() const {
  HttpEndpoint e = options_.endpoint;
  e.port = port_;
  return "http://" + e.ToString();
}

HttpResponse HttpServer::Dispatch(const HttpRequest& request) const {
  const HttpHandler* best = nullptr;
  size_t best_len = 0;
  for (const auto& [route, handler] : routes_) {
    bool prefix = !route.empty() && route.back() == '*';
    std::string_view r(route);
    if (prefix) r.remove_suffix(1);
    bool match =
        prefix ? std::string_view(request.path).substr(0, r.size()) == r : request.path == route;
    if (match && (best == nullptr || r.size() + !prefix > best_len)) {
      best = &handler;
      best_len = r.size() + !prefix;
    }
  }
  if (best == nullptr)
    return {404, "text/plain; charset=utf-8", "not found: " + request.path + "\n"};
  return (*best)(request);
}

namespace {

// Compares without leaking, through timing, how much of the token matched.
bool SameToken(const std::string& a, const std::string& b) {
  unsigned diff = a.size() ^ b.size();
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ (i < b.size() ? b[i] : 0);
  return diff == 0;
}

}  // namespace

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options,
                                                        std::map<std::string, HttpHandler> routes) {
  if (!options.endpoint.enabled) return InvalidArgument("HTTP endpoint is 'none'");
  if (!IsLoopbackHost(options.endpoint.host) && options.token.empty()) {
    return InvalidArgument("HTTP endpoint " + options.endpoint.ToString() +
                           " is not a loopback address: a token is required (http-token in the "
                           "config file), or bind it to 127.0.0.1");
  }
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->options_ = std::move(options);
  s->routes_ = std::move(routes);
  s->impl_ = std::make_unique<Impl>();
  httplib::Server& server = s->impl_->server;
  int threads = std::max(1, s->options_.threads);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which would let a second daemon
  // bind the same port and share its requests instead of failing.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // A keep-alive connection holds one of the threads until it closes: browsers keep several
  // open, so idle ones are closed after a second.
  server.set_keep_alive_timeout(1);
  server.set_read_timeout(5, 0);
  server.set_write_timeout(5, 0);
  HttpServer* self = s.get();
  server.Get(".*", [self](const httplib::Request& req, httplib::Response& res) {
    HttpRequest request;
    request.path = req.path;
    request.remote_addr = req.remote_addr;
    std::string token;
    for (const auto& [k, v] : req.params) {
      if (k == "token") {
        token = v;
      } else {
        request.params[k] = v;
      }
    }
    std::string auth = req.get_header_value("Authorization");
    if (auth.rfind("Bearer ", 0) == 0) token = auth.substr(7);
    HttpResponse response;
    if (!self->options_.token.empty() && !self->options_.public_paths.count(request.path) &&
        !SameToken(token, self->options_.token)) {
      response = {401, "text/plain; charset=utf-8",
                  token.empty() ? "a token is required (Authorization: Bearer TOKEN or "
                                  "?token=TOKEN)\n"
                                : "wrong token\n"};
    } else {
      try {
        response = self->Dispatch(request);
      } catch (const std::exception& e) {
        response = {500, "text/plain; charset=utf-8", std::string("internal error: ") + e.what()};
      }
    }
    res.status = response.status;
    res.set_header("Cache-Control", "no-store");
    res.set_content(std::move(response.body), response.content_type.c_str());
  });
  const HttpEndpoint& e = s->options_.endpoint;
  if (e.port == 0) {
    s->port_ = server.bind_to_any_port(e.host);
    if (s->port_ <= 0) return Unavailable("HTTP endpoint " + e.ToString() + ": cannot bind");
  } else {
    if (!server.bind_to_port(e.host, e.port)) {
      return Unavailable("HTTP endpoint " + e.ToString() +
                         ": cannot bind (address in use or not local)");
    }
    s->port_ = e.port;
  }
  s->thread_ = std::thread([self] { self->impl_->server.listen_after_bind(); });
  // stop() only reaches a server that is listening: wait for it, so the destructor never joins a
  // thread that starts listening after it.
  for (int i = 0; i < 5000 && !server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return s;
}

}  // namespace cohort
