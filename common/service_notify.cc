#include "common/service_notify.h"

#include <systemd/sd-daemon.h>

#include <string>

namespace cohort {

void NotifyReady(std::string_view status) {
  std::string message = "READY=1";
  if (!status.empty()) message += "\nSTATUS=" + std::string(status);
  sd_notify(0, message.c_str());
}

void NotifyStopping() { sd_notify(0, "STOPPING=1"); }

}  // namespace cohort
