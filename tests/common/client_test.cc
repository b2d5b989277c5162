// CoordinatorClient against a router standing in for the coordinator (a test double): what the
// client makes of replies that a coordinator of another release may give.
#include "common/client.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>

#include "common/messaging.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;

// Answers the one ListNodes request it gets with three nodes in racks r1, r1 and r2, echoing
// `echo` as the selector applied (without applying it).
void AnswerListNodes(RouterSocket& router, const std::string& echo, std::string* asked) {
  auto request = router.Receive(10s);
  if (!request.ok() || !request->has_value()) return;
  const auto* body = (*request)->message.As<wire::ListNodes>();
  if (body != nullptr && body->selector() != nullptr) *asked = body->selector()->str();
  wire::NodeListT list;
  for (const auto& [id, labels] :
       {std::pair{"a", "rack=r1"}, {"b", "rack=r1,gpu=h100"}, {"c", "rack=r2"}}) {
    auto node = std::make_unique<wire::NodeInfoT>();
    node->node_id = id;
    node->labels = labels;
    list.nodes.push_back(std::move(node));
  }
  list.selector = echo;
  (void)router.Send((*request)->peer, Encode((*request)->message.request_id(), std::move(list)));
}

std::set<std::string> Ids(const std::vector<wire::NodeInfoT>& nodes) {
  std::set<std::string> ids;
  for (const auto& n : nodes) ids.insert(n.node_id);
  return ids;
}

// A coordinator that predates ListNodes.selector lists every node and echoes none: the client
// matches the selector itself. One that echoes it has matched: the client takes its list as is.
TEST(ClientTest, ListNodesMatchesASelectorTheCoordinatorDidNotApply) {
  zmq::context_t context;
  auto bound = RouterSocket::Bind(context, "tcp://127.0.0.1:*");
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  RouterSocket router = std::move(*bound);
  auto client = CoordinatorClient::Connect(router.endpoint(), /*insecure=*/true);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  for (const std::string echo : {"", "rack=r1,gpu"}) {
    std::string asked;
    std::thread server([&] { AnswerListNodes(router, echo, &asked); });
    auto nodes = client->ListNodes("rack = r1, gpu");
    server.join();
    ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
    EXPECT_EQ(asked, "rack = r1, gpu") << "the selector is sent as given";
    if (echo.empty()) {
      EXPECT_EQ(Ids(*nodes), std::set<std::string>{"b"}) << "matched by the client";
    } else {
      EXPECT_EQ(Ids(*nodes), (std::set<std::string>{"a", "b", "c"})) << "the coordinator's list";
    }
  }
}

}  // namespace
}  // namespace cohort
