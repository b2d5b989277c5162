// The client config file, read by the `cohort` CLI and the Python client (python/cohort/client.py
// reads the same file with the same keys): $COHORT_CLIENT_CONFIG, else
// $HOME/.config/cohort/client.conf. Lines are `name = value`; `#` and `;` start comment lines;
// blank lines are skipped. The names are the CLI's global flags without dashes:
//   coordinator = tcp://head:7400          the client endpoint
//   insecure = false                       plaintext ZeroMQ (true/false, yes/no, 1/0)
//   key = ~/.config/cohort/client.key      this client's CURVE key pair
//   server-key = ~/.config/cohort/coordinator.pub   the coordinator's public key
//   timeout = 5s                           per call
// A leading "~/" in a path is $HOME. Precedence: built-in defaults, then the file, then the
// environment (COHORT_COORDINATOR, COHORT_INSECURE, COHORT_KEY, COHORT_SERVER_KEY), then flags.
//
// Errors: a file named by COHORT_CLIENT_CONFIG that cannot be read, an unknown name, a bad value:
// kInvalidArgument naming the file and line. The default file missing is not an error.
#pragma once

#include <string>

#include "common/client.h"
#include "common/status.h"

namespace cohort {

// $COHORT_CLIENT_CONFIG, else $HOME/.config/cohort/client.conf ("" without HOME).
std::string ClientConfigPath();

// Applies the config file's text (named `path` in errors) to `options`, leaving alone what the
// environment sets (see the precedence above).
Status ApplyClientConfig(const std::string& text, const std::string& path, ClientOptions& options);

// Built-in defaults, the config file (ClientConfigPath()), the environment: what the CLI starts
// from before its flags.
StatusOr<ClientOptions> ClientOptionsFromConfig();

}  // namespace cohort
