// LivenessToken: a name held while a transport is open, released at close, and not inherited by a
// child forked without exec.
#include "collective/same_host.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace cohort::collective {
namespace {

std::string UniqueName(const char* what) {
  return std::string("same-host-test/") + what + "/" + std::to_string(getpid());
}

TEST(LivenessTokenTest, HeldUntilReleasedAndOnlyOnce) {
  const std::string name = UniqueName("held");
  EXPECT_FALSE(LivenessTokenHeld(name));
  {
    LivenessToken token(name);
    ASSERT_TRUE(token.held());
    EXPECT_TRUE(LivenessTokenHeld(name));
    LivenessToken second(name);  // the name is taken: the second holds nothing
    EXPECT_FALSE(second.held());
    token.Release();
    EXPECT_FALSE(token.held());
    EXPECT_FALSE(LivenessTokenHeld(name));
    token.Release();  // idempotent
  }
  EXPECT_FALSE(LivenessTokenHeld(name));
}

TEST(LivenessTokenTest, TheDestructorReleases) {
  const std::string name = UniqueName("destructor");
  { LivenessToken token(name); }
  EXPECT_FALSE(LivenessTokenHeld(name));
}

// A DataLoader worker forked while the transport is open must not keep the parent's closed
// transport looking open: the child's copy is closed at the fork.
TEST(LivenessTokenTest, AChildForkedWithoutExecDoesNotHoldItsParentsToken) {
  const std::string name = UniqueName("fork");
  LivenessToken token(name);
  ASSERT_TRUE(token.held());
  int to_child[2];
  int to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Report whether this copy still holds anything, then live until the parent has checked.
    const char held = token.held() ? 'h' : 'f';
    if (write(to_parent[1], &held, 1) != 1) _exit(2);
    char go = 0;
    if (read(to_child[0], &go, 1) != 1) _exit(3);
    token.Release();  // on a copy that holds nothing: must not close another fd
    _exit(0);
  }
  char child_held = 0;
  ASSERT_EQ(read(to_parent[0], &child_held, 1), 1);
  EXPECT_EQ(child_held, 'f') << "the child's copy of the token still holds the socket";
  EXPECT_TRUE(token.held());
  EXPECT_TRUE(LivenessTokenHeld(name));
  token.Release();
  EXPECT_FALSE(LivenessTokenHeld(name))
      << "released by the parent, but still held while the child lives";
  const char go = 'g';
  ASSERT_EQ(write(to_child[1], &go, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) close(fd);
}

// A token made in the child after the fork is the child's own, and held.
TEST(LivenessTokenTest, AForkedChildCanHoldTokensOfItsOwn) {
  LivenessToken parent_token(UniqueName("parent"));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    LivenessToken own(std::string("same-host-test/child/") + std::to_string(getpid()));
    _exit(own.held() &&
                  LivenessTokenHeld(std::string("same-host-test/child/") + std::to_string(getpid()))
              ? 0
              : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

}  // namespace
}  // namespace cohort::collective
