// Tells systemd about a daemon's life (Type=notify units): READY once its sockets are bound,
// STOPPING when it begins a clean shutdown, and free-form STATUS lines for `systemctl status`.
// Outside systemd (no NOTIFY_SOCKET) every call is a no-op.
#pragma once

#include <string_view>

namespace cohort {

void NotifyReady(std::string_view status = "");
void NotifyStopping();
void NotifyStatus(std::string_view status);

}  // namespace cohort
