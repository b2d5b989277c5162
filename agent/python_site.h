// PythonSite: Python stacks of any Python process of a replica, not only of one that imported
// cohort's package. The agent keeps a directory holding one `sitecustomize.py` (<work dir>/
// .python-site) and puts it first on the PYTHONPATH of every process replica it starts
// (agent/replica_env.h), and of every runc/crun container replica, bind-mounted read-only at the
// same path, above the image's PYTHONPATH (agent/oci_launcher.h), so that each Python process of
// the replica, the stock PyTorch script that never heard of Cohort, torchrun's workers and their
// spawned DataLoader workers alike, registers faulthandler on COHORT_STACK_DUMP_SIGNAL at its
// start, writing to $COHORT_STACK_DUMP_DIR/python-<pid>.txt, as `import cohort.collective` does
// (python/cohort/_stack_dump.py). The agent's stack dumps (agent/stack_dump.h) then show where
// each Python thread is, for `cohort stacks` and the hang watchdog.
//
// Nothing else changes for the replica: the module then runs the `sitecustomize` it hides (the
// next one on sys.path, Debian's /etc/python3.X/sitecustomize.py), and a failure to register
// is silent. A pool's env `COHORT_PYTHON_STACKS: "0"` leaves PYTHONPATH as the job gives it.
// A container's own Python (any version: the module is Python 2 and 3) reads it the same way;
// with docker/podman, whose image environment the agent does not see, containers are left
// alone. Interpreters started with -S or -I (isolated) read no sitecustomize.
//
// Thread safety: InstallPythonSite writes files; call it once, at the agent's start.
#pragma once

#include <string>

#include "common/status.h"

namespace cohort::agent {

// The module written (Python 2 and 3 syntax: an interpreter of either reads it).
extern const char kSitecustomizePy[];

// Writes <work_dir>/.python-site/sitecustomize.py (replaced atomically when it differs; the
// directory and file readable by every account) and returns that directory.
StatusOr<std::string> InstallPythonSite(const std::string& work_dir);

}  // namespace cohort::agent
