// Fuzz target: arbitrary bytes as a received frame. Parse must refuse or accept without reading
// out of bounds, and an accepted envelope must unpack every field safely.
#include <cstddef>
#include <cstdint>

#include "common/messaging.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto message = cohort::Message::Parse(zmq::message_t(data, size));
  if (message.ok()) {
    std::unique_ptr<cohort::wire::EnvelopeT> unpacked(message->envelope().UnPack());
    (void)message->ErrorStatus();
  }
  return 0;
}
