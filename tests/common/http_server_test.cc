#include "common/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

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

TEST(HttpServer, ServesRoutesLongestPrefixFirst) {
  HttpServerOptions o;
  o.endpoint = *ParseHttpEndpoint("127.0.0.1:0");
  auto s = HttpServer::Start(o, Routes());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  httplib::Client c("127.0.0.1", (*s)->port());
  auto r = c.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "m");
  r = c.Get("/api/nodes?q=1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "api /api/nodes 1");
  r = c.Get("/api/jobs/a");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "job /api/jobs/a");
  r = c.Get("/nothing");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
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
  httplib::Client c("127.0.0.1", (*s)->port());
  auto r = c.Get("/api/x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = c.Get("/metrics");  // a public path
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = c.Get("/api/x?token=wrong");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(r->body, "wrong token\n");
  r = c.Get("/api/x?token=s3cret");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = c.Get("/api/x", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = c.Get("/api/x?token=s3cret&q=2");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "api /api/x 2");  // the token is not handed to handlers
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
