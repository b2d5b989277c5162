// HttpServer is the small HTTP endpoint of the daemons (DESIGN.md "HTTP"): the coordinator's
// /metrics, dashboard and /api/, and each agent's /metrics. It wraps cpp-httplib (Debian's
// libcpp-httplib-dev, header-only; only http_server.cc includes it) and serves GET requests from
// threads of its own, so a slow or stuck HTTP client never holds up a daemon's loop: handlers must
// read only what the loop publishes for them (a snapshot behind a mutex or an atomic pointer),
// never the loop's own state.
//
// Endpoint text: "HOST:PORT" ("127.0.0.1:7480", "0.0.0.0:7480", "[::1]:7480"; port 0 picks a
// free one, port() tells which) or "none" (no server). Auth: a server bound to a loopback address
// answers anyone who can reach it; a server bound elsewhere requires a token (Start refuses to
// start without one). When a token is set, every request must carry it as
// "Authorization: Bearer TOKEN" or "?token=TOKEN"; a missing or wrong one is answered 401. Only
// the options' public_paths (static files) are served without it.
//
// Routes: an exact path ("/metrics") or a prefix ending in '*' ("/api/jobs/*"); the longest match
// wins; no match is 404. A handler that throws is answered 500 with the exception's text.
//
// Thread safety: handlers run concurrently on the server's threads.
// Lifetime: the destructor stops the server and joins its threads; handlers (and what they
// capture) must outlive it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"

namespace cohort {

struct HttpEndpoint {
  bool enabled = false;  // false: "none"
  std::string host;      // without brackets
  int port = 0;
  std::string ToString() const;
};

// "none", "HOST:PORT" or "[V6]:PORT"; anything else is kInvalidArgument naming the text.
StatusOr<HttpEndpoint> ParseHttpEndpoint(std::string_view text);
// 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(std::string_view host);

struct HttpRequest {
  std::string path;
  std::map<std::string, std::string> params;  // query parameters (the token removed)
  std::string remote_addr;
  std::string Param(const std::string& key, const std::string& fallback = "") const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  HttpEndpoint endpoint;
  std::string token;  // required when the host is not a loopback address
  // Paths served without the token (a page's static files, which hold no data).
  std::set<std::string> public_paths;
  // Connections served at once (an idle keep-alive connection holds one for up to a second).
  int threads = 8;
};

class HttpServer {
 public:
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts serving `routes` (path or prefix* -> handler). kInvalidArgument when the
  // endpoint needs a token and has none; kUnavailable when the address cannot be bound.
  static StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options,
                                                     std::map<std::string, HttpHandler> routes);

  int port() const { return port_; }
  // "http://HOST:PORT"
  std::string url() const;

 private:
  struct Impl;
  HttpServer() = default;
  HttpResponse Dispatch(const HttpRequest& request) const;

  HttpServerOptions options_;
  std::map<std::string, HttpHandler> routes_;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace cohort
