"""Python stacks on request, for the Cohort agent's hang diagnosis.

Inside a Cohort job the agent sets COHORT_STACK_DUMP_DIR and COHORT_STACK_DUMP_SIGNAL in every
replica's environment. register() (called when cohort.collective or cohort.torch is imported)
opens <dir>/python-<pid>.txt and registers faulthandler on that signal, so that when the
coordinator's watchdog finds the job hung, the agent signals this process and reads every
thread's Python stack from the file (agent/stack_dump.h). The file's existence is what tells the
agent that the signal is handled: a process that did not register is never signalled.
Outside a job (the variables unset) it does nothing.
"""

import faulthandler
import os
import sys

_file = None


def register():
    """Registers the dump handler once per process; a failure leaves the process as it was."""
    global _file
    # The agent's sitecustomize (agent/python_site.h) registered this process at its start.
    if getattr(sys.modules.get("sitecustomize"), "_cohort_stack_file", None) is not None:
        return
    directory = os.environ.get("COHORT_STACK_DUMP_DIR")
    signum = os.environ.get("COHORT_STACK_DUMP_SIGNAL")
    if _file is not None or not directory or not signum:
        return
    try:
        os.makedirs(directory, exist_ok=True)
        f = open(os.path.join(directory, f"python-{os.getpid()}.txt"), "a", buffering=1)
        faulthandler.register(int(signum), file=f, all_threads=True, chain=False)
        _file = f
    except (OSError, ValueError, RuntimeError):
        _file = None
