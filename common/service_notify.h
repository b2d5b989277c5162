// Tells systemd about a daemon's life (Type=notify units): READY (with a STATUS line for
// `systemctl status`) once its sockets are bound, STOPPING when it begins a clean shutdown.
// Outside systemd (no NOTIFY_SOCKET) every call is a no-op.
#pragma once

#include <string_view>

namespace cohort {

void NotifyReady(std::string_view status = "");
void NotifyStopping();

}  // namespace cohort
