#include "common/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <utility>

namespace cohort {
namespace {

TEST(HttpEndpoint, Parses) {
  auto e = ParseHttpEndpoint("127.0.0.1:7480");
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->enabled);
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, 7480);
  auto v6 = ParseHttpEndpoint("[::1]:80");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->ToString(), "[::1]:80");
  auto none = ParseHttpEndpoint("none");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->enabled);
  for (const char* bad : {"", "7480", ":7480", "host:", "host:99999", "host:x", "::1:80", "[::1"}) {
    auto r = ParseHttpEndpoint(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("HTTP endpoint"), std::string::npos);
  }
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
}

std::map<std::string, HttpHandler> Routes() {
  return {{"/metrics",
           [](const HttpRequest&) {
             return HttpResponse{200, "text/plain", "m"};
           }},
          {"/api/*",
           [](const HttpRequest& r) {
             return HttpResponse{200, "text/plain", "api " + r.path + " " + r.Param("q")};
           }},
          {"/api/jobs/*", [](const HttpRequest& r) {
             return HttpResponse{200, "text/plain", "job " + r.path};
           }}};
}

// GET `path` (with `headers`) from the server on 127.0.0.1:`port`: the status and the body, or
// {-1, ""} when no answer came.
using Reply = std::pair<int, std::string>;
Reply Get(int port, const std::string& path, const httplib::Headers& headers = {}) {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get(path, headers);
  if (!r) return {-1, ""};
  return {r->status, r->body};
}

TEST(HttpServer, ServesRoutesLongestPrefixFirst) {
  HttpServerOptions o;
  o.endpoint = *ParseHttpEndpoint("127.0.0.1:0");
  auto s = HttpServer::Start(o, Routes());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const int port = (*s)->port();
  EXPECT_EQ(Get(port, "/metrics"), Reply(200, "m"));
  EXPECT_EQ(Get(port, "/api/nodes?q=1").second, "api /api/nodes 1");
  EXPECT_EQ(Get(port, "/api/jobs/a").second, "job /api/jobs/a");
  EXPECT_EQ(Get(port, "/nothing").first, 404);
}

TEST(HttpServer, NonLoopbackNeedsToken) {
  HttpServerOptions o;
  o.endpoint = *ParseHttpEndpoint("0.0.0.0:0");
  auto s = HttpServer::Start(o, Routes());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("token"), std::string::npos);
}

TEST(HttpServer, WrongTokenRefused) {
  HttpServerOptions o;
  o.endpoint = *ParseHttpEndpoint("0.0.0.0:0");
  o.token = "s3cret";
  o.public_paths = {"/metrics"};
  auto s = HttpServer::Start(o, Routes());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const int port = (*s)->port();
  EXPECT_EQ(Get(port, "/api/x").first, 401);
  EXPECT_EQ(Get(port, "/metrics").first, 200);  // a public path
  EXPECT_EQ(Get(port, "/api/x?token=wrong"), Reply(401, "wrong token\n"));
  EXPECT_EQ(Get(port, "/api/x?token=s3cret").first, 200);
  EXPECT_EQ(Get(port, "/api/x", {{"Authorization", "Bearer s3cret"}}).first, 200);
  // The token is not handed to handlers.
  EXPECT_EQ(Get(port, "/api/x?token=s3cret&q=2").second, "api /api/x 2");
}

TEST(HttpServer, BusyPortIsAnError) {
  HttpServerOptions o;
  o.endpoint = *ParseHttpEndpoint("127.0.0.1:0");
  auto first = HttpServer::Start(o, Routes());
  ASSERT_TRUE(first.ok());
  o.endpoint.port = (*first)->port();
  auto second = HttpServer::Start(o, Routes());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace cohort
