// Handoff: what a cohort-agent hands over to the image it re-executes in a live restart (SIGUSR2,
// agent/main.cc: an upgraded package's agent takes over without stopping a replica). execve keeps
// the agent's pid, so every replica's main process stays its child (waited for, signalled and
// reaped as before); what the new image needs beside that is each attempt's record: its process
// (pid, cgroup, PID-namespace init and the descriptor of init's status pipe, kept open across the
// execve; a container's runtime process), its files and environment, and how far its log and
// measurements were delivered. And how the attempts that ended here lately ended, which every
// registration reports (ReplicaManager::Registration), so that a live restart forgets none.
//
// The old image writes it as JSON to HandoffPath(work_dir) and sets kHandoffVariable in the
// environment of the execve; the new one reads the file, removes it and unsets the variable
// before it does anything else (TakeHandoff). Without the variable (an ordinary start) a file
// there is never read: one left by an agent that died before its execve is overwritten later. A
// file that does not parse, was written by another process (a leftover of an agent that died
// between writing it and its execve), or holds an entry that does not check out is refused whole
// with an error naming what is wrong: the new image then starts as after a crash, and its sweep
// kills what the replicas of that file left (unless it goes back, below).
//
// The way back: the old image also hands over a descriptor of its own executable, open across the
// execve, and the arguments it ran with (PreviousImage). A new image that fails its start before
// it took the replicas over (a port it cannot bind, a handoff it cannot read) goes back to that
// image, same pid, with the handoff as it was written and why (agent/main.cc): the replicas stay
// the children of an agent that runs, instead of dying with the failed one. A crash of the new
// image still takes them down (they are its children).
//
// Thread safety: plain functions and values.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/replica_user.h"
#include "common/schema/cohort_generated.h"
#include "common/status.h"

namespace cohort::agent {

// The environment variable ("1") telling the re-executed image to take the handoff.
inline constexpr char kHandoffVariable[] = "COHORT_AGENT_HANDOFF";

// <work_dir>/.agent-handoff.json
std::string HandoffPath(const std::string& work_dir);

// What a container id (agent/oci_launcher.h's ContainerId) is made of: letters, digits, '-', '_'
// and '.'. ValidContainerId: only those, not starting with '-' (it becomes a runtime command's
// argument, never an option).
bool ContainerIdChar(char c);
bool ValidContainerId(const std::string& id);

// One running attempt, as the new image adopts it (ReplicaManager::Adopt).
struct HandedOverAttempt {
  std::string job;
  int64_t job_created_ms = 0;  // LaunchReplica.job_created_ms
  std::string replica;
  int attempt = 0;
  std::vector<int> gpus;
  // Its main process: the agent's child (a PID namespace's init where `status_fd` >= 0: the read
  // end of the pipe init writes the command's wait status to, left open across the execve).
  pid_t pid = 0;
  int status_fd = -1;
  std::string cgroup;  // "" without one
  // Its LaunchRequest's: the working dir (also its COHORT_ATTEMPT_DIR marker), the log, the
  // whole environment, the account it runs as.
  std::string working_dir;
  std::string log_path;
  std::map<std::string, std::string> env;
  std::optional<RunAs> run_as;
  bool chief = false;  // a tuning trial's chief: its metric file is forwarded
  // A container's: `pid` is its runtime's foreground process (`runc run`, `docker run`), adopted
  // by the container launcher, which the new image must have (the same --container-runtime).
  bool container = false;
  // Its container id (agent/oci_launcher.h's ContainerId; ValidContainerId); "" from an image
  // older than container tags, whose ids had none.
  std::string container_id;
  // When its launch began (FlightClockNs): a flight recorder older than that is not its own.
  int64_t launched_ns = 0;
  // Delivery: the log's bytes and the measurements the coordinator has acknowledged.
  uint64_t log_acked = 0;
  uint64_t measurements_acked = 0;
};

// The image that wrote a handoff: its executable, open (not closed on exec), and its argv.
struct PreviousImage {
  int fd = -1;
  std::vector<std::string> argv;
};

struct Handoff {
  pid_t agent_pid = 0;  // the process that wrote it, which must be the one reading it
  std::string from_version;
  // Written by every image since the way back came (an older one's handoff has none).
  std::optional<PreviousImage> previous_image;
  // Set where a new image went back to this one (HandoffGoingBack): why it failed its start.
  std::string went_back_because;
  std::vector<HandedOverAttempt> attempts;
  // The final statuses of attempts that ended here, the oldest first: job, job_created_ms,
  // replica, attempt, state (a final one), exit_code, signal, cause_signal and message.
  std::vector<wire::ReplicaStatusT> ended;
};

// kInvalidArgument naming the attempt where one holds a path or an environment value that is not
// UTF-8 (JSON cannot carry it, and a handoff must not change it): the live restart is refused.
// What is not UTF-8 in the ends (text for people) is replaced by U+FFFD, as in the ends file.
StatusOr<std::string> EncodeHandoff(const Handoff& handoff);
// kInvalidArgument naming the field at fault ("handoff attempts[1].pid: must be positive").
StatusOr<Handoff> DecodeHandoff(const std::string& text);

// Writes the handoff to HandoffPath(work_dir) and returns that path.
StatusOr<std::string> WriteHandoff(const std::string& work_dir, const Handoff& handoff);
// The way back to the image that wrote a handoff, read from the file on its own, so that a new
// image that cannot take the rest of it goes back as well: its PreviousImage, whose descriptor is
// checked to be an open executable file, and the file as it was written.
struct WayBack {
  PreviousImage image;
  std::string handoff;
};

// What the old image handed over, when this process was re-executed with one (kHandoffVariable
// set): reads and removes HandoffPath(work_dir) and unsets the variable. nullopt when there is
// none; an error when there is one that cannot be taken (see above), also when this process did
// not write it. With `way_back`, it is set where the file holds one this process can take (its
// pid wrote it, and the descriptor is an executable file), whether or not the rest is taken.
StatusOr<std::optional<Handoff>> TakeHandoff(const std::string& work_dir,
                                             std::optional<WayBack>* way_back = nullptr);
// The handoff to give the image `way_back` goes back to: the file it wrote, without its
// previous_image (that descriptor is not open in it) and with went_back_because = `why`.
std::string HandoffGoingBack(const WayBack& way_back, const std::string& why);

// The ends file: how the attempts that ended here ended (Handoff::ended), kept on disk for the
// next start of the agent that is not a live restart (a reboot, a stop and start, an upgrade by
// restart, a crash). It reports them at its first registration as a live restart's image does:
// a coordinator that had not heard an end (it was down, or unreachable, when the replica ended
// and the agent stopped) learns it, where it would otherwise take the replica for lost with the
// node that came back without it (a chief that succeeded would run again, a preempted one count
// as a failure).
//
// The agent rewrites it durably (fsynced, renamed over, its folder fsynced) whenever the ends
// change, and reads it once, at an ordinary start. It names its node: a file another node id
// wrote (a work dir reused) is not taken. A file that does not parse, or holds an entry that does
// not check out, is refused whole with an error naming what is wrong; the agent then starts
// without it and writes a new one at the next end.
//
// <work_dir>/.agent-ends.json
std::string EndsPath(const std::string& work_dir);
// What is not UTF-8 in an end (its message, say) is written as U+FFFD.
std::string EncodeEnds(const std::string& node_id, const std::vector<wire::ReplicaStatusT>& ended);
// kInvalidArgument naming the entry or field at fault; kFailedPrecondition where another node
// wrote it.
StatusOr<std::vector<wire::ReplicaStatusT>> DecodeEnds(const std::string& text,
                                                       const std::string& node_id);
// The ends file's permission bits (the agent writes it with LatestFileWriter, off its loop).
inline constexpr mode_t kEndsFileMode = 0600;
// What EndsPath(work_dir) holds; none where there is no file.
StatusOr<std::vector<wire::ReplicaStatusT>> ReadEnds(const std::string& work_dir,
                                                     const std::string& node_id);

}  // namespace cohort::agent
