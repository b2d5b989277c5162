// ZeroMQ sends and receives that a signal cannot fail. A handled signal that lands while a socket
// looks at its command mailbox fails zmq_msg_send/zmq_msg_recv with EINTR before any message
// moved: none was taken from the socket, none queued, the caller's frame is untouched. Every
// process of ours handles signals (the coordinator's SIGTERM, the agent's SIGHUP and SIGUSR2, a
// training script's own: Python's, torch's DataLoader's SIGCHLD), and without these a signal
// could end a daemon's loop or split a multipart message. So the call is made again.
// A poll that a signal ends is not made again: it returns as if nothing were ready, and its
// caller, which waits in a loop anyway, waits again for what is left of its timeout.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <utility>
#include <vector>
#include <zmq.hpp>

namespace cohort {

// zmq::poll(items, count, timeout); 0 with every revents cleared when a signal ended the wait.
// Other errors throw zmq::error_t as cppzmq's.
inline int PollFrames(zmq::pollitem_t* items, size_t count, std::chrono::milliseconds timeout) {
  try {
    return zmq::poll(items, count, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;
    for (size_t i = 0; i < count; ++i) items[i].revents = 0;
    return 0;
  }
}

// socket.recv(frame, flags), made again after EINTR; other errors throw zmq::error_t as cppzmq's.
inline zmq::recv_result_t RecvFrame(zmq::socket_t& socket, zmq::message_t& frame,
                                    zmq::recv_flags flags) {
  while (true) {
    try {
      return socket.recv(frame, flags);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
}

// Every frame of one multipart message, each received as RecvFrame does (empty: no message was
// waiting, with zmq::recv_flags::dontwait).
inline std::vector<zmq::message_t> RecvMultipart(zmq::socket_t& socket, zmq::recv_flags flags) {
  std::vector<zmq::message_t> frames;
  while (true) {
    zmq::message_t frame;
    if (!RecvFrame(socket, frame, flags)) break;
    const bool more = frame.more();
    frames.push_back(std::move(frame));
    if (!more) break;
  }
  return frames;
}

// socket.send(frame, flags) (a zmq::message_t or a zmq::const_buffer), made again after EINTR.
template <typename Frame>
zmq::send_result_t SendFrame(zmq::socket_t& socket, Frame&& frame, zmq::send_flags flags) {
  while (true) {
    try {
      return socket.send(std::forward<Frame>(frame), flags);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
}

}  // namespace cohort
