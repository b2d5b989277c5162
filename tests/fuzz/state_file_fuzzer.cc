// Fuzz target: arbitrary bytes as a file a daemon reads back at its start: what a crash, a torn
// write, a full disk or a hostile hand may have left there. The first byte picks the reader, the
// rest is the file:
//   0  the agent's ends file (agent/handoff.h, DecodeEnds): an accepted file, written again
//      (EncodeEnds) and read back, must give the same ends; another node's is refused;
//   1  a live restart's handoff (DecodeHandoff): the same round trip through EncodeHandoff, which
//      may refuse only what is not UTF-8, and a decoded file is UTF-8; the handoff a new image
//      going back writes from it (HandoffGoingBack) decodes too;
//   2  a daemon's config file (ParseConfigText with each kind of option the daemons declare: text,
//      integers, a switch, a duration, a list), then po::notify;
//   3  the client config file (ApplyClientConfig).
// Each must return a value or an error; nothing may crash, throw or hang.
#include <boost/program_options.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "agent/handoff.h"
#include "common/client.h"
#include "common/client_config.h"
#include "common/config.h"

namespace {

namespace po = boost::program_options;
using cohort::agent::DecodeEnds;
using cohort::agent::DecodeHandoff;
using cohort::agent::EncodeEnds;
using cohort::agent::EncodeHandoff;

void Ends(const std::string& text) {
  auto ended = DecodeEnds(text, "node-1");
  if (!ended.ok()) return;
  const std::string written = EncodeEnds("node-1", *ended);
  auto again = DecodeEnds(written, "node-1");
  if (!again.ok() || EncodeEnds("node-1", *again) != written) std::abort();
  if (DecodeEnds(written, "node-2").ok()) std::abort();  // another node never takes it
}

void Handoff(const std::string& text) {
  auto handoff = DecodeHandoff(text);
  if (!handoff.ok()) return;
  auto written = EncodeHandoff(*handoff);
  if (!written.ok()) std::abort();  // what was read from JSON is UTF-8, so it writes
  auto again = DecodeHandoff(*written);
  if (!again.ok()) std::abort();
  auto rewritten = EncodeHandoff(*again);
  if (!rewritten.ok() || *rewritten != *written) std::abort();
  // Going back (a new image that failed its start) hands the old image what it wrote, less the
  // way back, plus why: that must be taken as well.
  auto back = DecodeHandoff(cohort::agent::HandoffGoingBack({{}, text}, "why"));
  if (!back.ok() || back->previous_image || back->went_back_because != "why" ||
      back->attempts.size() != handoff->attempts.size()) {
    std::abort();
  }
}

void DaemonConfig(std::string_view text) {
  std::string name;
  int port = 0;
  int64_t memory_mb = 0;
  bool insecure = false;
  cohort::FlagDuration timeout;
  std::vector<std::string> labels;
  po::options_description options;
  options.add_options()                           //
      ("name", po::value(&name))                  //
      ("port", po::value(&port))                  //
      ("log.memory-mb", po::value(&memory_mb))    //
      ("insecure", po::bool_switch(&insecure))    //
      ("heartbeat-timeout", po::value(&timeout))  //
      ("label", po::value(&labels)->composing()->multitoken());
  po::variables_map values;
  if (!cohort::ParseConfigText(text, "fuzz.conf", options, &values).ok()) return;
  try {
    po::notify(values);
  } catch (const po::error&) {
    // What notify may refuse is the caller's to report; ParseFlags turns it into an error.
  }
}

void ClientConfig(const std::string& text) {
  cohort::ClientOptions options;
  (void)cohort::ApplyClientConfig(text, "client.conf", options);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      Ends(text);
      break;
    case 1:
      Handoff(text);
      break;
    case 2:
      DaemonConfig(text);
      break;
    default:
      ClientConfig(text);
      break;
  }
  return 0;
}
