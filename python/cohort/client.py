"""Python client for the Cohort coordinator: the same requests as the `cohort` CLI.

Speaks the wire protocol of common/schema/cohort.fbs over a ZeroMQ DEALER socket, like the C++
client library (common/client.h). Replies are returned as plain dicts and lists so scripts can
print or json.dump them.

    from cohort import Client
    client = Client("tcp://127.0.0.1:7400")                      # plaintext (--insecure)
    client = Client("tcp://coord:7400", key_file="~/.config/cohort/client.key")   # CURVE
    client = Client()         # as the client config file says (see load_client_config)
    name = client.submit(open("job.yaml").read())
    name = client.submit(spec_dict, name="train-2", after=["prep"], hold=True)  # submit's flags
    job = client.wait(name)          # {'name': ..., 'state': 'SUCCEEDED', 'replicas': [...], ...}
    study = client.wait_study(client.submit_study(open("study.yaml").read()))
    best = study["best_trial"]       # the id of the best trial ('' when none reported)
"""

import datetime
import difflib
import json
import os
import pwd
import time
import warnings
from collections.abc import Mapping

import flatbuffers
import zmq
from zmq.utils.monitor import recv_monitor_message

from cohort.wire import (Ack, ArrayList, ArrayStatus, BackupReply, BackupState, Body, CancelArray,
                         CancelJob, CancelStudy,
                         DeleteJob, DryRunOutcome, DumpStacks, Envelope, ErrorReply, ExecInReplica,
                         ExecOutput, ExecSessionIo, GetArray, GetJob, GetJobMetrics, GetLogs,
                         GetStudy, GetUsage, GetVersion, JobInfo, JobList, JobMetrics, JobState,
                         KeyValue,
                         ListArrays, ListJobs, ListNodes, ListQueues, ListStudies, LogData,
                         NodeAdmin, NodeAdminReply, NodeList, QueueList, ReplicaState, StudyInfo,
                         StudyList, SubmitJob, SubmitJobReply, SubmitStudy, SuspendArray,
                         SuspendJob, UpdateArray, UpdateJob, UsageReport, VersionInfo)

PROTOCOL_VERSION = 1
# `cohort exec` (common/exec_limits.h): the command's default timeout, and how much longer the
# coordinator waits for its agent's answer.
EXEC_DEFAULT_KILL_AFTER_S = 60.0
EXEC_ANSWER_SLACK_S = 10.0
# Interactive sessions (common/exec_limits.h): the input or output one step carries at most, and
# how long an agent holds a step with nothing to answer.
EXEC_STEP_BYTES = 64 << 10
EXEC_STEP_HOLD_S = 0.05
FILE_IDENTIFIER = b"CHRT"
FINISHED_STATES = ("SUCCEEDED", "FAILED", "CANCELLED")

# cohort::StatusCode names, by value (common/status.h).
_STATUS_NAMES = ["OK", "INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "FAILED_PRECONDITION",
                 "UNAVAILABLE", "DEADLINE_EXCEEDED", "ABORTED", "DATA_LOSS",
                 "RESOURCE_EXHAUSTED", "CANCELLED", "INTERNAL", "PERMISSION_DENIED",
                 "UNAUTHENTICATED"]


class CohortWarning(UserWarning):
    """What the coordinator warns a submitter of (Client.submit)."""


class CohortError(Exception):
    """An error the coordinator answered with; `code` is the status name (NOT_FOUND, ...)."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class Unreachable(CohortError):
    """No reply from the coordinator in time."""

    def __init__(self, endpoint, timeout_s):
        super().__init__("UNAVAILABLE",
                         f"no reply from the coordinator at {endpoint} within {timeout_s:g} s")


class Refused(CohortError):
    """The coordinator refused this client's key: it is not (or no longer) listed in the
    coordinator's clients/ directory. The CLI exits 4 for the same."""

    def __init__(self, endpoint, public_key, detail=None):
        super().__init__("UNAUTHENTICATED", detail or (
            f"the coordinator at {endpoint} refused this key (not listed): public key "
            f"{public_key}; its admin lists a key by putting its .pub file in the coordinator's "
            "key directory"))


_CONFIG_NAMES = ("coordinator", "insecure", "key", "server-key", "timeout")


def client_config_path():
    """$COHORT_CLIENT_CONFIG, else ~/.config/cohort/client.conf (as the CLI reads it)."""
    return os.environ.get("COHORT_CLIENT_CONFIG") or os.path.expanduser(
        "~/.config/cohort/client.conf")


def _parse_seconds(text):
    """'5s', '1500ms', '2m', '1h' or bare seconds, as seconds."""
    for unit, scale in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(unit):
            return float(text[:-len(unit)]) * scale
    return float(text)


def load_client_config(path=None):
    """The client config file as a dict, with the CLI's names and meaning (common/client_config.h):
    coordinator, insecure (bool), key, server-key (paths, ~ expanded), timeout (seconds). {} when
    the default file does not exist; a file named by COHORT_CLIENT_CONFIG must. Raises CohortError
    (INVALID_ARGUMENT naming the file and line) for an unknown name or a bad value."""
    named = path or os.environ.get("COHORT_CLIENT_CONFIG")
    path = path or client_config_path()
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        if named:
            raise CohortError("INVALID_ARGUMENT", f"cannot read the client config {path}")
        return {}
    config = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        where = f"{path}:{number}: "
        if not sep:
            raise CohortError("INVALID_ARGUMENT", where + f"expected 'name = value', got '{line}'")
        if name not in _CONFIG_NAMES:
            # The CLI's reader names the name meant, where one is near (common/nearest_name.h).
            near = difflib.get_close_matches(name, _CONFIG_NAMES, n=1, cutoff=0.75)
            raise CohortError("INVALID_ARGUMENT", where + f"unknown name '{name}'" + (
                f" (did you mean '{near[0]}'?)" if near
                else " (known: " + ", ".join(_CONFIG_NAMES) + ")"))
        if name == "insecure":
            if value not in ("true", "yes", "1", "false", "no", "0"):
                raise CohortError("INVALID_ARGUMENT",
                                  where + f"insecure: expected true or false, got '{value}'")
            config[name] = value in ("true", "yes", "1")
        elif name == "timeout":
            try:
                config[name] = _parse_seconds(value)
            except ValueError:
                config[name] = -1
            if config[name] <= 0:
                raise CohortError("INVALID_ARGUMENT", where + "timeout: expected a positive "
                                  f"duration (5s, 1500ms), got '{value}'")
        elif name in ("key", "server-key"):
            config[name] = os.path.expanduser(value)
        else:
            config[name] = value
    return config


def _read_key_file(path):
    """The public-key (and secret-key, for a .key file) of a key file `cohort keygen` wrote."""
    keys = {}
    with open(os.path.expanduser(path)) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, value = line.partition("=")
            if not sep or name.strip() not in ("public-key", "secret-key"):
                raise CohortError("INVALID_ARGUMENT", f"{path}:{number}: expected "
                                  "'public-key = ...' or 'secret-key = ...'")
            keys[name.strip()] = value.strip()
    if "public-key" not in keys:
        raise CohortError("INVALID_ARGUMENT", f"{path}: no public-key line")
    return keys


def _enum_names(enum_class):
    return {v: k for k, v in vars(enum_class).items() if not k.startswith("_")}


_JOB_STATES = _enum_names(JobState.JobState)
_REPLICA_STATES = _enum_names(ReplicaState.ReplicaState)
_BODIES = _enum_names(Body.Body)
_DRY_RUN_OUTCOMES = _enum_names(DryRunOutcome.DryRunOutcome)


def _spec_text(spec):
    """A spec's text for the wire: YAML text as given, a dict as JSON (a subset of YAML that
    keeps every value as written: no YAML 1.1 'yes' or '1.10' surprises on the way)."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Mapping):
        return json.dumps(spec)
    raise TypeError(f"a spec is YAML text or a dict, not {type(spec).__name__}")


def _key_values(entries):
    """A dict as the wire's KeyValues."""
    out = []
    for key, value in (entries or {}).items():
        entry = KeyValue.KeyValueT()
        entry.key, entry.value = str(key), str(value)
        out.append(entry)
    return out


def _env_and_args(env, args):
    """submit()'s and submit_study()'s `env` (a dict) and `args` (a list) as the wire's KeyValues
    and strings."""
    if isinstance(args, str):
        raise TypeError("args: a list of strings, not one string")
    return _key_values(env), [str(a) for a in (args or ())]


def _since_ms(since):
    """A `since` argument as epoch milliseconds: a datetime (naive: local time), a timedelta (that
    long ago) or seconds since the epoch."""
    if isinstance(since, datetime.timedelta):
        since = time.time() - since.total_seconds()
    elif isinstance(since, datetime.datetime):
        since = since.timestamp()
    return int(float(since) * 1000)


def _text(value):
    """A wire string as text; bytes that are not UTF-8 (which a coordinator older than its checks
    could send) become U+FFFD rather than raising in the caller's code."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else (value or "")


def _local_user():
    """This process's account name (its effective uid's), as the CLI claims it in plaintext."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return os.environ.get("USER", "")


def _usage_fields(usage, own):
    """A ReplicaUsage or NodeUsage: CPU cores, memory and GPUs, then `own(usage)`'s fields; None
    when nothing was said."""
    if usage is None:
        return None
    fields = {
        "cpu_cores": usage.cpuCores,
        "memory_bytes": usage.memoryBytes,
        "gpus": [{
            "index": g.index,
            "utilization": g.utilization,
            "memory_used_bytes": g.memoryUsedBytes,
            "memory_total_bytes": g.memoryTotalBytes,
        } for g in (usage.gpus or [])],
    }
    fields.update(own(usage))
    return fields


def _usage_to_dict(usage):
    """What a running replica uses (`cohort top`); None when its agent has not said."""
    return _usage_fields(usage, lambda u: {"age_ms": u.ageMs, "gpus_idle_ms": u.gpusIdleMs})


def _node_usage_to_dict(usage):
    """What a node's running replicas use, summed (`cohort top --nodes`); None when none said."""
    return _usage_fields(usage, lambda u: {"replicas": u.replicas})


def _job_to_dict(job):
    return {
        "name": _text(job.name),
        "state": _JOB_STATES.get(job.state, str(job.state)),
        "message": _text(job.message),
        "create_time_ms": job.createTimeMs,
        "start_time_ms": job.startTimeMs,
        "end_time_ms": job.endTimeMs,
        "restarts": job.restarts,
        "max_restarts": job.maxRestarts,
        "restart_rule": _text(job.restartRule),
        "output_dir": _text(job.outputDir),
        "trial_id": _text(job.trialId),
        "study": _text(job.study),
        "queue": _text(job.queue),
        "priority": _text(job.priority),
        "owner": _text(job.owner),
        "labels": {_text(kv.key): _text(kv.value) for kv in (job.labels or [])},
        "replicas": [{
            "replica": _text(r.replica),
            "role": _text(r.role),
            "index": r.index,
            "pool": r.pool,
            "node_id": _text(r.nodeId),
            "gpus": list(r.gpus) if r.gpus is not None else [],
            "state": _REPLICA_STATES.get(r.state, str(r.state)),
            "attempt": r.attempt,
            "exit_code": r.exitCode,
            "signal": r.signal,
            "cause_signal": r.causeSignal,
            "message": _text(r.message),
            "usage": _usage_to_dict(r.usage),
        } for r in (job.replicas or [])],
        "events": [{"time_ms": e.timeMs, "message": _text(e.message)}
                   for e in (job.events or [])],
    }


def _study_to_dict(study):
    return {
        "name": _text(study.name),
        "state": _text(study.state),
        "message": _text(study.message),
        "metric": _text(study.metric),
        "goal": _text(study.goal),
        "algorithm": _text(study.algorithm),
        "max_trials": study.maxTrials,
        "parallel_trials": study.parallelTrials,
        "best_trial": _text(study.bestTrial),
        "owner": _text(study.owner),
        "create_time_ms": study.createTimeMs,
        "end_time_ms": study.endTimeMs,
        "trials": [{
            "id": _text(t.id),
            "parameters": {_text(kv.key): _text(kv.value) for kv in (t.parameters or [])},
            "state": _text(t.state),
            "final_metric": t.finalMetric if t.hasFinalMetric else None,
            "job": _text(t.job),
            "steps": t.steps,
            "message": _text(t.message),
        } for t in (study.trials or [])],
    }


def _node_to_dict(node):
    return {
        "node_id": _text(node.nodeId),
        "address": _text(node.address),
        "version": _text(node.version),
        "agent_started_ms": node.agentStartedMs,
        "state": _text(node.state),
        "gpus": [{"index": g.index, "model": _text(g.model), "memory_mb": g.memoryMb,
                  "uuid": _text(g.uuid), "numa_node": g.numaNode}
                 for g in (node.gpus or [])],
        "gpus_used": list(node.gpusUsed) if node.gpusUsed is not None else [],
        "cpus": node.cpus,
        "cpus_used": node.cpusUsed,
        "memory_mb": node.memoryMb,
        "memory_used_mb": node.memoryUsedMb,
        "replicas": node.replicas,
        "last_heartbeat_ms": node.lastHeartbeatMs,
        "admin": _text(node.admin),
        "labels": _text(node.labels),
        "label_edits": _text(node.labelEdits),
        "unhealthy": _text(node.unhealthy),
        "usage": _node_usage_to_dict(node.usage),
        "unhealthy_gpus": [{"index": g.index, "reason": _text(g.reason)}
                           for g in (node.unhealthyGpus or [])],
        "cordoned_gpus": list(node.cordonedGpus) if node.cordonedGpus is not None else [],
        # The note kept with a cordon or drain (of the node or of some of its GPUs): why, who,
        # since when (0: nothing of it is cordoned).
        "admin_reason": _text(node.adminReason),
        "admin_by": _text(node.adminBy),
        "admin_since_ms": node.adminSinceMs,
        # Its history, oldest first, when asked for (nodes(events_of=NODE)).
        "events": [{"seq": e.seq, "time_ms": e.timeMs, "text": _text(e.text)}
                   for e in (node.events or [])],
        # The replicas holding part of it (`cohort nodes NODE`).
        "holders": [{
            "job": _text(h.job),
            "replica": _text(h.replica),
            "state": _REPLICA_STATES.get(h.state, str(h.state)),
            "gpus": list(h.gpus) if h.gpus is not None else [],
            "cpus": h.cpus,
            "memory_mb": h.memoryMb,
        } for h in (node.holders or [])],
    }


def _update_body(body_class, verb, name, priority, queue):
    """The body of update() or update_array(): a priority class or a queue (None: left as it
    is), at least one of them."""
    if not priority and not queue:
        raise ValueError(f"{verb}: give a priority class or a queue")
    body = body_class()
    body.name = name
    body.priority = priority or ""
    body.queue = queue or ""
    return body


def _dry_run_plan_to_dict(plan, name):
    """One wire DryRunPlan, of the job (or task) `name`, as dry_run() returns it."""
    return {
        "name": name,
        "outcome": _DRY_RUN_OUTCOMES.get(plan.outcome, str(plan.outcome)),
        "replicas": [{
            "replica": _text(r.replica),
            "node_id": _text(r.nodeId),
            "gpus": list(r.gpus) if r.gpus is not None else [],
        } for r in (plan.replicas or [])],
        "preempts": [_text(v) for v in (plan.preempts or [])],
        "reason": _text(plan.reason),
        "queue": _text(plan.queue),
        "queued_ahead": plan.queuedAhead,
    }


def _array_to_dict(array):
    """One job array as `cohort arrays --json` writes it."""
    return {
        "name": _text(array.name),
        "state": _text(array.state),
        "tasks": array.tasks,
        "ended": array.ended,
        "array": _text(array.array),
        "parallelism": array.parallelism,
        "in_flight": array.inFlight,
        "by_state": {_JOB_STATES[c.state]: c.count for c in (array.byState or [])},
        "owner": _text(array.owner),
        "queue": _text(array.queue),
        "create_time_ms": array.createTimeMs,
        "start_time_ms": array.startTimeMs,
        "end_time_ms": array.endTimeMs,
    }


def _queue_to_dict(queue):
    """One queue as `cohort queues --json` writes it."""
    return {
        "name": _text(queue.name),
        "gpu_quota": queue.gpuQuota,
        "cpu_quota": queue.cpuQuota,
        "weight": queue.weight,
        "gpus_used": queue.gpusUsed,
        "cpus_used": queue.cpusUsed,
        "running": queue.running,
        "waiting": queue.waiting,
        "waiting_jobs": [_text(n) for n in (queue.waitingJobs or [])],
        "suspended": queue.suspended,
        "gpu_idle_limit_ms": queue.gpuIdleLimitMs,
        "cpus_per_gpu": queue.cpusPerGpu,
        "memory_mb_per_gpu": queue.memoryMbPerGpu,
    }


def _poll(get, done, what, poll_s, timeout_s):
    """Calls get() every poll_s seconds until done(its result); returns that result. Raises
    DEADLINE_EXCEEDED ("<what> is still <state>") after timeout_s (None: no limit)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        last = get()
        if done(last):
            return last
        if deadline is not None and time.monotonic() > deadline:
            raise CohortError("DEADLINE_EXCEEDED", f"{what} is still {last['state']}")
        time.sleep(poll_s)


class Client:
    """One connection to a coordinator's client endpoint. Not thread-safe.

    CURVE (the coordinator without --insecure) when `key_file` (or COHORT_KEY) names this
    client's key pair, a NAME.key written by `cohort keygen`; `server_key_file` (or
    COHORT_SERVER_KEY, else ~/.config/cohort/coordinator.pub) is the coordinator's public key.
    Plaintext otherwise, or when `insecure` (or COHORT_INSECURE=1) is true. What is not given
    comes from the environment (COHORT_COORDINATOR, COHORT_INSECURE, COHORT_KEY,
    COHORT_SERVER_KEY), then the client config file (load_client_config: the CLI's file and
    names), then the defaults (tcp://127.0.0.1:7400, 5 s). A call raises Refused when the
    coordinator refuses the key, Unreachable when nothing answers in `timeout_s`.

    Over CURVE the coordinator knows the user from the key (clients/<user>.pub). In plaintext the
    client claims `user` (default: this process's account name), unverified, as the CLI does: the
    owner of what it submits, checked against the owner of what it cancels (a job of another
    user's raises CohortError PERMISSION_DENIED)."""

    def __init__(self, endpoint=None, timeout_s=None, context=None,
                 key_file=None, server_key_file=None, insecure=None, user=None):
        config = load_client_config()
        endpoint = (endpoint or os.environ.get("COHORT_COORDINATOR") or config.get("coordinator")
                    or "tcp://127.0.0.1:7400")
        if timeout_s is None:
            timeout_s = config.get("timeout", 5.0)
        if insecure is None:
            env = os.environ.get("COHORT_INSECURE")
            insecure = env in ("1", "true", "yes") if env is not None else config.get("insecure",
                                                                                      False)
        if not insecure:
            key_file = key_file or os.environ.get("COHORT_KEY") or config.get("key")
            server_key_file = (server_key_file or os.environ.get("COHORT_SERVER_KEY")
                               or config.get("server-key"))
        else:
            key_file = None
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self._context = context or zmq.Context.instance()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._monitor = None
        self._refused = False
        self._refused_at = 0.0
        self.public_key = None
        self._claimed_user = None
        if key_file:
            own = _read_key_file(key_file)
            if "secret-key" not in own:
                raise CohortError("INVALID_ARGUMENT", f"{key_file}: no secret-key line (a .pub "
                                  "file was given where this client's .key file is needed)")
            server_key_file = (server_key_file or os.environ.get("COHORT_SERVER_KEY")
                               or "~/.config/cohort/coordinator.pub")
            self.public_key = own["public-key"]
            self._socket.curve_publickey = own["public-key"].encode()
            self._socket.curve_secretkey = own["secret-key"].encode()
            self._socket.curve_serverkey = _read_key_file(server_key_file)["public-key"].encode()
            # Handshake outcomes: a refused key is told apart from a coordinator not there.
            self._monitor = self._socket.get_monitor_socket(
                zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        else:
            self._claimed_user = user if user is not None else _local_user()
        self._socket.connect(endpoint)
        self._next_id = 1

    def close(self):
        if self._monitor is not None:
            self._socket.disable_monitor()
            self._monitor.close()
        self._socket.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- requests -----------------------------------------------------------------------

    def submit(self, spec, name=None, after=(), hold=False, env=None, args=(), labels=None,
               array=None):
        """Submits a job; returns its name. Raises CohortError on a bad spec (the message names
        the field).

        `spec`: a job file's YAML text, or the same as a dict (sent as JSON, which is YAML); or a
        Vertex AI CustomJob file or dict (gcloud's --config, or a CustomJob as the REST API
        gives it), which the coordinator converts (README "Vertex AI job files").
        The keywords are `cohort submit`'s flags, applied by the coordinator to the text before
        it parses it: `name` sets the job's name (a name_prefix dropped), `after` adds to
        scheduling.after ("prep", or "train:ended"; one string or several), `hold` submits the
        job held (SUSPENDED until resumed), `env` (a dict) is set in the env of every pool that
        runs a command (`--env`), `args` (a list) appended to its args (`-- ARGS`), `labels` (a
        dict) set in the job's labels (`--label`; list_jobs(selector=...) and
        usage(by_label=...) find them), `array` ("0-99%8": indexes as N, N-M or N-M:STEP,
        comma-separated, then optionally %PARALLELISM) submits a job array (`--array`,
        scheduling.array): one job of each index, named NAME-INDEX, at most PARALLELISM running
        at once; the name returned is the array's (array_tasks() lists them, cancel_array()
        cancels them). What the coordinator warns of (an output dir off the shared storage, ...)
        is issued as a CohortWarning."""
        reply = self._submit_job(spec, name, after, hold, env, args, labels, array,
                                 dry_run=False)
        return _text(reply.name)

    def dry_run(self, spec, name=None, after=(), hold=False, env=None, args=(), labels=None,
                array=None):
        """`cohort submit --dry-run`: the coordinator checks `spec` (with the keywords of
        submit()) as a submit would, raising the same errors, and stores nothing. Returns what its
        next scheduling round would do with the job were it submitted now: a dict with "name",
        "outcome" ("START", "PREEMPT", "WAIT", "WAIT_FOR_JOBS" or "HOLD"), "replicas" (START:
        each {"replica", "node_id", "gpus"}), "preempts" (PREEMPT: "job (priority P, queue Q)"
        of each job it would stop), "reason" (why it would wait, or be held), "queue" and
        "queued_ahead" (the jobs queued there before it), "defaults" (what its queue would fill
        in: a line a pool, "pool worker: cpus 48 and memory_mb 393216 per replica, for its 4
        GPUs (queue research's defaults: ...)"). Warnings come as with submit(). For
        an array, these are its first task's, "name" that task's, and "tasks" has the same for
        each task it would let in at once (the first `parallelism`, or all), submitted
        together; the others would wait for their turn."""
        reply = self._submit_job(spec, name, after, hold, env, args, labels, array,
                                 dry_run=True)
        plan = reply.dryRun
        if plan is None:
            name = _text(reply.name)
            raise CohortError(
                "FAILED_PRECONDITION",
                f"the coordinator does not know dry runs (it is older than this client): it "
                f"submitted the job as {name}; cancel('{name}') takes it back")
        out = _dry_run_plan_to_dict(
            plan, _text(reply.tasks[0]) if reply.tasks else _text(reply.name))
        out["defaults"] = [_text(d) for d in reply.defaults or []]
        if reply.taskDryRuns:
            out["tasks"] = [_dry_run_plan_to_dict(p, _text(n))
                            for n, p in zip(reply.tasks, reply.taskDryRuns)]
        return out

    def _submit_job(self, spec, name, after, hold, env, args, labels, array, dry_run):
        """A SubmitJob with submit()'s keywords; its warnings issued (to submit()'s caller)."""
        body = SubmitJob.SubmitJobT()
        body.specYaml = _spec_text(spec)
        if name is not None:
            if not name:
                raise ValueError("name: an empty name")
            body.name = name
        body.after = [after] if isinstance(after, str) else list(after or ())
        body.hold = bool(hold)
        if array is not None:
            if not isinstance(array, str) or not array:
                raise ValueError(f"array: a text such as '0-99%8', got {array!r}")
            body.array = array
        body.env, body.args = _env_and_args(env, args)
        body.labels = _key_values(labels)
        body.dryRun = dry_run
        reply = self._call(Body.Body.SubmitJob, body, SubmitJobReply.SubmitJobReplyT)
        for warning in reply.warnings or []:
            warnings.warn(_text(warning), CohortWarning, stacklevel=3)
        return reply

    def get_job(self, name):
        return _job_to_dict(
            self._call_named(Body.Body.GetJob, GetJob.GetJobT, name, JobInfo.JobInfoT))

    def get_job_spec(self, name):
        """The job file the coordinator stored for the job, as text (`cohort status JOB --spec`):
        what was submitted, with the submit keywords applied, a generated name filled in, and a
        Vertex AI file as the Cohort job file it became. Where no job has the name, the file of
        the job array of that name (`cohort status ARRAY --spec`: submitted again, it makes the
        array as it is). CohortError NOT_FOUND naming both when neither has it."""
        for body_type, body, reply_class in (
                (Body.Body.GetJob, GetJob.GetJobT(), JobInfo.JobInfoT),
                (Body.Body.GetArray, GetArray.GetArrayT(), ArrayStatus.ArrayStatusT)):
            body.name = name
            body.withSpec = True
            try:
                return _text(self._call(body_type, body, reply_class).specYaml)
            except CohortError as e:
                if e.code != "NOT_FOUND":
                    raise
        raise CohortError("NOT_FOUND", f"no job or array named '{name}'")

    def list_jobs(self, states=None, since=None, limit=0, selector=None):
        """The jobs the coordinator knows, oldest first, as `cohort list`: with no filter every
        job; with any, the coordinator's state store answers (the newest `limit` of the jobs that
        match, still oldest first). `states`: state names, any case ("RUNNING", "failed"; one
        string or several); `since`: jobs submitted at or after it, a datetime (naive: local
        time), a timedelta (that long ago) or seconds since the epoch; `limit`: 0 for no limit;
        `selector`: only the jobs whose labels match it (`cohort list -l`, Kubernetes' syntax:
        "team=vision,sweep in (lr,wd)"). Each job's "labels" is a dict."""
        body = ListJobs.ListJobsT()
        if states is not None:
            names = [states] if isinstance(states, str) else list(states)
            by_name = {name: value for value, name in _JOB_STATES.items()}
            unknown = [n for n in names if str(n).upper() not in by_name]
            if unknown:
                raise ValueError(f"states: unknown {unknown} (one of {', '.join(by_name)})")
            body.states = [by_name[str(n).upper()] for n in names]
        if since is not None:
            body.createdSinceMs = _since_ms(since)
        if limit < 0:
            raise ValueError(f"limit: must be 0 (none) or more, got {limit}")
        body.limit = int(limit)
        if selector:
            body.selector = selector
        reply = self._call(Body.Body.ListJobs, body, JobList.JobListT)
        return [_job_to_dict(j) for j in (reply.jobs or [])]

    def top(self, job=None):
        """What each running replica of `job` (None: of every running job) uses, as `cohort top
        --json`: [{"job", "replica", "node_id", "usage"}], usage as in get_job's replicas (None
        until its agent has reported it)."""
        jobs = [self.get_job(job)] if job is not None else self.list_jobs(states="RUNNING")
        return [{"job": j["name"], "replica": r["replica"], "node_id": r["node_id"],
                 "usage": r["usage"]}
                for j in jobs for r in j["replicas"] if r["state"] == "RUNNING"]

    def cancel(self, name):
        return _job_to_dict(
            self._call_named(Body.Body.CancelJob, CancelJob.CancelJobT, name, JobInfo.JobInfoT))

    def array(self, name):
        """The job array `name` as `cohort status ARRAY --json` gives it: {"array": name,
        "summary": as arrays() gives each, "tasks": its tasks by index, each as get_job gives
        it}. CohortError NOT_FOUND when no array has that name."""
        reply = self._call_named(Body.Body.GetArray, GetArray.GetArrayT, name,
                                 ArrayStatus.ArrayStatusT)
        if reply.summary is None:
            raise CohortError("INTERNAL", f"get array {name}: the reply has no summary")
        return {"array": name, "summary": _array_to_dict(reply.summary),
                "tasks": [_job_to_dict(j) for j in (reply.tasks or [])]}

    def array_tasks(self, name):
        """The tasks of the job array `name` (submit(array=...)), by index, each as get_job
        gives it; [] when no array has that name."""
        try:
            return self.array(name)["tasks"]
        except CohortError as e:
            if e.code == "NOT_FOUND":
                return []
            raise

    def arrays(self):
        """Every job array, newest first, as `cohort arrays --json` gives them: its state
        ('ACTIVE' until every task has ended, then SUCCEEDED, FAILED or CANCELLED as after=
        judges it), tasks, ended, in_flight, parallelism, by_state {'RUNNING': 2, ...}, ..."""
        reply = self._call(Body.Body.ListArrays, ListArrays.ListArraysT(), ArrayList.ArrayListT)
        return [_array_to_dict(a) for a in (reply.arrays or [])]

    def wait_array(self, name, poll_s=1.0, timeout_s=None):
        """Polls until every task of the job array `name` has ended (`cohort watch ARRAY`);
        returns its tasks by index, as array_tasks(). CohortError NOT_FOUND when no array has
        that name, DEADLINE_EXCEEDED after `timeout_s` (None: no limit)."""
        def get():
            array = self.array(name)
            summary = array["summary"]
            array["state"] = (f"{summary['state']} ({summary['ended']} of {summary['tasks']} "
                              "tasks ended)")
            array["ended"] = summary["ended"] == summary["tasks"]
            return array
        return _poll(get, lambda a: a["ended"], f"array {name}", poll_s, timeout_s)["tasks"]

    def cancel_array(self, name):
        """Cancels every task of the job array `name` not ended (`cohort cancel ARRAY`); returns
        its tasks after, by index. Raises CohortError NOT_FOUND when no array has that name,
        PERMISSION_DENIED (no task cancelled) when the caller may not cancel one of them."""
        body = CancelArray.CancelArrayT()
        body.name = name
        reply = self._call(Body.Body.CancelArray, body, JobList.JobListT)
        return [_job_to_dict(j) for j in (reply.jobs or [])]

    def suspend_array(self, name):
        """Suspends every task of the job array `name` not ended (`cohort suspend ARRAY`): a task
        in flight keeps its slot of the array's parallelism. Returns its tasks after, by index.
        CohortError NOT_FOUND when no array has that name, PERMISSION_DENIED (no task
        suspended) when the caller may not suspend one of them."""
        return self._suspend_array(name, False)

    def resume_array(self, name):
        """Queues each suspended task of the job array `name` again (`cohort resume ARRAY`);
        returns its tasks after, by index."""
        return self._suspend_array(name, True)

    def update_array(self, name, priority=None, queue=None):
        """update() for every task of the job array `name` not ended (`cohort update ARRAY`);
        returns its tasks after, by index."""
        body = _update_body(UpdateArray.UpdateArrayT, "update_array", name, priority, queue)
        reply = self._call(Body.Body.UpdateArray, body, JobList.JobListT)
        return [_job_to_dict(j) for j in (reply.jobs or [])]

    def _suspend_array(self, name, resume):
        body = SuspendArray.SuspendArrayT()
        body.name = name
        body.resume = resume
        reply = self._call(Body.Body.SuspendArray, body, JobList.JobListT)
        return [_job_to_dict(j) for j in (reply.jobs or [])]

    def suspend(self, name):
        """Suspends a job: its replicas stop (SIGTERM, the stop grace) and it is placed nowhere
        until resume(); no restart is spent. Returns the job after (SUSPENDED)."""
        return self._suspend(name, False)

    def resume(self, name):
        """Queues a suspended job again (it resumes from its newest checkpoint). Returns the job
        after (QUEUED)."""
        return self._suspend(name, True)

    def update(self, name, priority=None, queue=None):
        """`cohort update`: moves a job that has not ended to another priority class or queue
        (None: left as it is). Returns the job after; its "priority" and "queue" say them."""
        body = _update_body(UpdateJob.UpdateJobT, "update", name, priority, queue)
        return _job_to_dict(self._call(Body.Body.UpdateJob, body, JobInfo.JobInfoT))

    def _suspend(self, name, resume):
        body = SuspendJob.SuspendJobT()
        body.name = name
        body.resume = resume
        return _job_to_dict(self._call(Body.Body.SuspendJob, body, JobInfo.JobInfoT))

    def nodes(self, selector=None, events_of=None):
        """The registered nodes, as `cohort nodes --json` gives them; with `selector`, a
        Kubernetes label selector (`cohort nodes -l`: "rack=r1,gpu in (h100,h200),!maintenance"),
        those whose labels match it. A malformed selector is a CohortError INVALID_ARGUMENT naming
        what is wrong; a coordinator too old to match selectors is a CohortError
        FAILED_PRECONDITION (it would list every node). Node `events_of` comes with its history
        (its "events", oldest first, as `cohort nodes NODE` lists them)."""
        body = ListNodes.ListNodesT()
        body.selector = selector or ""
        body.eventsOf = events_of or ""
        reply = self._call(Body.Body.ListNodes, body, NodeList.NodeListT)
        if (selector or "").strip() and not reply.selector:
            raise CohortError("FAILED_PRECONDITION",
                              "the coordinator does not match nodes to a selector (it is older "
                              "than this client); list every node and filter their labels")
        return [_node_to_dict(n) for n in (reply.nodes or [])]

    def node(self, name):
        """One node, as `cohort nodes NODE --json` gives it: with its GPUs (model, memory, UUID,
        NUMA node) and `holders`, the replicas holding part of it. An unknown name is a
        CohortError NOT_FOUND naming the nearest node's."""
        nodes = self.nodes()
        for node in nodes:
            if node["node_id"] == name:
                return node
        near = difflib.get_close_matches(name, [n["node_id"] for n in nodes], n=1)
        raise CohortError("NOT_FOUND", f"no node '{name}'" +
                          (f" (did you mean '{near[0]}'?)" if near else ""))

    def queues(self):
        """Each queue's quota, use, and its running, waiting (the next in the order they are
        tried: waiting_jobs) and suspended jobs, as `cohort queues --json` gives them."""
        reply = self._call(Body.Body.ListQueues, ListQueues.ListQueuesT(), QueueList.QueueListT)
        return [_queue_to_dict(q) for q in (reply.queues or [])]

    def coordinator_version(self):
        """The coordinator's build, as `cohort version` prints it: the release and the commit it
        was built from, "0.1.0+g298bf5264a1c"."""
        reply = self._call(Body.Body.GetVersion, GetVersion.GetVersionT(), VersionInfo.VersionInfoT)
        return _text(reply.coordinator)

    def metrics(self, job):
        """The training metrics a job's replicas reported ($CLOUD_ML_HP_METRIC_FILE, as
        cohort.hypertune writes it), in arrival order: the points of `cohort metrics --json`,
        [{'step', 'time_ms', 'tag', 'value', 'replica'}, ...]."""
        body = GetJobMetrics.GetJobMetricsT()
        body.job = job
        reply = self._call(Body.Body.GetJobMetrics, body, JobMetrics.JobMetricsT)
        return [{"step": p.step, "time_ms": p.timeMs, "tag": _text(p.tag), "value": p.value,
                 "replica": _text(p.replica)} for p in (reply.points or [])]

    def usage(self, user=None, queue=None, since=None, selector=None, by_label=None):
        """GPU-hours, CPU-hours, jobs and failures per user and queue, as `cohort usage`: rows
        [{'user', 'queue', 'jobs', 'failed', 'gpu_hours', 'cpu_hours'}, ...] by user, then
        queue; `since` as list_jobs takes it (None: all time); `selector`: only the jobs whose
        labels match it, as list_jobs takes it. With `by_label` (a label key, `--by-label`): a
        row per value of that label instead, {'label', 'jobs', ...}, by value, 'label' None in
        the row of the jobs without it (last)."""
        body = GetUsage.GetUsageT()
        body.user = user or ""
        body.queue = queue or ""
        body.sinceMs = 0 if since is None else _since_ms(since)
        body.selector = selector or ""
        body.byLabel = by_label or ""
        reply = self._call(Body.Body.GetUsage, body, UsageReport.UsageReportT)
        rows = []
        for r in reply.rows or []:
            row = ({"label": None if r.unlabelled else _text(r.label)} if by_label else
                   {"user": _text(r.user), "queue": _text(r.queue)})
            row.update({"jobs": r.jobs, "failed": r.failed, "gpu_hours": r.gpuHours,
                        "cpu_hours": r.cpuHours})
            rows.append(row)
        return rows

    def read_logs(self, job, replica="chief-0", offset=0, max_bytes=1 << 20):
        """One chunk of a replica's logs: (bytes, next_offset, complete)."""
        body = GetLogs.GetLogsT()
        body.job = job
        body.replica = replica
        body.offset = offset
        body.maxBytes = max_bytes
        reply = self._call(Body.Body.GetLogs, body, LogData.LogDataT)
        data = bytes(reply.data) if reply.data is not None else b""
        return data, reply.nextOffset, reply.complete

    def follow_logs(self, job, replica="chief-0", poll_s=1.0, timeout_s=None):
        """Yields a replica's output (bytes, from its start, every attempt) as it is written,
        until the replica has finished and all of it was read: `cohort logs --follow` for one
        replica. A job still queued yields nothing until it starts. Raises CohortError as
        read_logs does, and TimeoutError after `timeout_s` (None: no limit)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        offset = 0
        while True:
            data, offset, complete = self.read_logs(job, replica, offset)
            if data:
                yield data
            if complete:
                return
            if not data:
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"the log of {job} {replica} was not complete within "
                                       f"{timeout_s:g} s")
                time.sleep(poll_s)

    def wait(self, name, poll_s=1.0, timeout_s=None, until=None):
        """Polls until the job is SUCCEEDED, FAILED or CANCELLED, or with `until` (a predicate on
        the job's status dict) until that holds; returns its last status."""
        done = until or (lambda job: job["state"] in FINISHED_STATES)
        return _poll(lambda: self.get_job(name), done, f"job {name}", poll_s, timeout_s)

    def submit_study(self, spec, name=None, env=None, args=(), labels=None):
        """Submits a study (a study file's YAML text, or the same as a dict; or a Vertex AI
        HyperparameterTuningJob file or dict, which the coordinator converts); returns the study
        name. `name`, as `cohort tune --name`: the study's name instead of the file's (the
        coordinator sets it; a tuning file may then lack its displayName). `env` (a dict) and
        `args` (a list), as `cohort tune --env K=V -- ARGS`: set in the env of every pool of the
        trial job that runs a command, and appended to its args, before each trial's
        `--<parameter>=<value>`; `labels` (a dict), as `--label K=V`: set in every trial job's
        labels. Raises CohortError on a bad spec (the message names the field). What the
        coordinator warns of (a tuning file's fields with no counterpart) is issued as a
        CohortWarning."""
        body = SubmitStudy.SubmitStudyT()
        body.specYaml = _spec_text(spec)
        if name is not None:
            if not name:
                raise ValueError("name: an empty name")
            body.name = name
        body.env, body.args = _env_and_args(env, args)
        body.labels = _key_values(labels)
        reply = self._call(Body.Body.SubmitStudy, body, StudyInfo.StudyInfoT)
        for warning in reply.warnings or []:
            warnings.warn(_text(warning), CohortWarning, stacklevel=2)
        return _text(reply.name)

    def get_study(self, name):
        return _study_to_dict(
            self._call_named(Body.Body.GetStudy, GetStudy.GetStudyT, name, StudyInfo.StudyInfoT))

    def get_study_spec(self, name):
        """The study file the coordinator stored for the study, as text (`cohort trials STUDY
        --spec`): a Vertex AI tuning file as the Cohort study file it became. The owner's or an
        admin's to read."""
        body = GetStudy.GetStudyT()
        body.name = name
        body.withSpec = True
        return _text(self._call(Body.Body.GetStudy, body, StudyInfo.StudyInfoT).specYaml)

    def cancel_study(self, name):
        """Cancels a study (its running trials are cancelled); returns the study after."""
        return _study_to_dict(self._call_named(Body.Body.CancelStudy, CancelStudy.CancelStudyT,
                                               name, StudyInfo.StudyInfoT))

    def delete(self, name):
        """Deletes a finished job and its records (FAILED_PRECONDITION for one not finished)."""
        self._call_named(Body.Body.DeleteJob, DeleteJob.DeleteJobT, name, Ack.AckT)

    def admin_node(self, node_id, action, labels=None, gpus=None, reason=None):
        """An admin's change to a node: cordon, uncordon, drain, drain-now, forget, or label and
        label-reset with `labels` (["gpu=h100", "zone-"]: set gpu, remove zone); cordon, uncordon,
        drain and drain-now with `gpus` ([3, 5]) act on those GPUs of the node alone; cordon,
        drain and drain-now keep `reason` with the cordon (the node's admin_reason, with
        admin_by and admin_since_ms). Returns (message, node dict or None)."""
        body = NodeAdmin.NodeAdminT()
        body.nodeId = node_id
        body.action = action
        body.labels = list(labels or [])
        body.gpus = [int(gpu) for gpu in (gpus or [])]
        body.reason = reason or ""
        reply = self._call(Body.Body.NodeAdmin, body, NodeAdminReply.NodeAdminReplyT)
        return _text(reply.message), _node_to_dict(reply.node) if reply.node else None

    def backup(self, timeout_s=600.0):
        """`cohort backup`: an admin asks the coordinator (run with --backup-dir) for a backup of
        its state database now and waits until it is written, up to `timeout_s`. Returns a dict:
        path (on the coordinator's host), bytes, jobs, studies, duration_ms."""
        reply = self._call(Body.Body.BackupState, BackupState.BackupStateT(),
                           BackupReply.BackupReplyT, timeout_s=timeout_s)
        return {"path": _text(reply.path), "bytes": reply.bytes, "jobs": reply.jobs,
                "studies": reply.studies, "duration_ms": reply.durationMs}

    def exec(self, job, command, replica=None, kill_after_s=EXEC_DEFAULT_KILL_AFTER_S):
        """`cohort exec`: runs `command` (a list of arguments) beside a running replica of `job`
        (default chief-0, else the job's first) as the replica runs: its environment, working
        directory, account and cgroup, or inside its container. Killed after `kill_after_s`
        (at most an hour). Waits for its end and returns {"exit_code", "output" (bytes, stdout
        and stderr together, at most 1 MiB), "truncated", "timed_out", "killed_because" (why
        its agent killed it, e.g. its live restart; "" when it did not), "replica", "attempt"}.
        CohortError: NOT_FOUND (no such job or replica), FAILED_PRECONDITION (the replica is not
        running), PERMISSION_DENIED (not the owner nor an admin), INVALID_ARGUMENT."""
        if isinstance(command, (str, bytes)):
            raise TypeError("command must be a list of arguments, e.g. ['nvidia-smi', '-L']")
        body = ExecInReplica.ExecInReplicaT()
        body.job = job
        body.replica = replica or ""
        body.argv = [str(arg) for arg in command]
        body.timeoutMs = int(kill_after_s * 1000)
        reply = self._call(Body.Body.ExecInReplica, body, ExecOutput.ExecOutputT,
                           timeout_s=kill_after_s + EXEC_ANSWER_SLACK_S + self.timeout_s)
        return {"exit_code": reply.exitCode,
                "output": bytes(reply.output) if reply.output is not None else b"",
                "truncated": reply.truncated, "timed_out": reply.timedOut,
                "killed_because": _text(reply.killedBecause),
                "replica": _text(reply.replica), "attempt": reply.attempt}

    def exec_session(self, job, command, replica=None, tty=False, rows=0, cols=0):
        """`cohort exec -i` (`-it` with `tty`): starts `command` beside a running replica of
        `job` as exec() does, with its stdin, stdout and stderr streamed, and returns the
        ExecSession that drives it (send(), read(), communicate(), kill()). With `tty` the
        command has a terminal of its own, `rows` x `cols` (0: 24 x 80). The session is killed
        when no step comes for 30 s, and with its replica's attempt. CohortError as exec()."""
        if isinstance(command, (str, bytes)):
            raise TypeError("command must be a list of arguments, e.g. ['python3', '-i']")
        return ExecSession(self, job, [str(arg) for arg in command], replica or "", tty, rows,
                           cols)

    def _exec_step(self, body):
        return self._call(Body.Body.ExecSessionIo, body, ExecOutput.ExecOutputT,
                          timeout_s=EXEC_STEP_HOLD_S + EXEC_ANSWER_SLACK_S + self.timeout_s)

    def stacks(self, job, replica=None, timeout_s=120.0, poll_s=0.25):
        """`cohort stacks`: has the stacks of the job's running replicas (`replica` alone when
        given) taken now, as the watchdog does for a hung job, and waits for them. Returns
        {replica: text}: each process's command line, Python stacks (faulthandler) and native
        stacks. CohortError as `exec`; TimeoutError naming the replicas whose dumps did not come
        within `timeout_s`."""
        waiting = {}
        for r in self.get_job(job)["replicas"]:
            if r["state"] == "RUNNING" and replica in (None, r["replica"]):
                end = self._read_dump(job, r["replica"], r["attempt"], 0)[1]
                waiting[r["replica"]] = (r["attempt"], end)
        body = DumpStacks.DumpStacksT()
        body.job = job
        body.replica = replica or ""
        self._call(Body.Body.DumpStacks, body, JobInfo.JobInfoT)
        deadline = time.monotonic() + timeout_s
        stacks = {}
        while waiting:
            for name, (attempt, offset) in list(waiting.items()):
                text, _ = self._read_dump(job, name, attempt, offset)
                if text:
                    stacks[name] = text.decode("utf-8", "replace")
                    del waiting[name]
            if waiting and time.monotonic() >= deadline:
                raise TimeoutError(f"no stacks came from {', '.join(sorted(waiting))} within "
                                   f"{timeout_s:g} s")
            if waiting:
                time.sleep(poll_s)
        return stacks

    def _read_dump(self, job, replica, attempt, offset):
        """What one attempt's stack dumps hold from `offset` on: (bytes, the end)."""
        data = b""
        while True:
            body = GetLogs.GetLogsT()
            body.job = job
            body.replica = replica
            body.attempt = attempt
            body.offset = offset
            body.maxBytes = 1 << 20
            body.dump = True
            reply = self._call(Body.Body.GetLogs, body, LogData.LogDataT)
            chunk = bytes(reply.data) if reply.data is not None else b""
            if not chunk:
                return data, offset
            data += chunk
            offset = max(reply.nextOffset, offset + len(chunk))

    def list_studies(self):
        reply = self._call(Body.Body.ListStudies, ListStudies.ListStudiesT(), StudyList.StudyListT)
        return [_study_to_dict(s) for s in (reply.studies or [])]

    def wait_study(self, name, poll_s=1.0, timeout_s=None):
        """Polls until the study is no longer ACTIVE; returns its last status."""
        return _poll(lambda: self.get_study(name), lambda study: study["state"] != "ACTIVE",
                     f"study {name}", poll_s, timeout_s)

    # ---- wire ---------------------------------------------------------------------------

    def _call_named(self, body_type, body_class, name, reply_class):
        """_call for a request whose body is a name alone (a job's, an array's, a study's)."""
        body = body_class()
        body.name = name
        return self._call(body_type, body, reply_class)

    def _call(self, body_type, body, reply_class, timeout_s=None):
        self._retry_if_refused()
        request_id = self._next_id
        self._next_id += 1
        envelope = Envelope.EnvelopeT()
        envelope.version = PROTOCOL_VERSION
        envelope.requestId = request_id
        envelope.bodyType = body_type
        envelope.body = body
        if self._claimed_user:
            envelope.user = self._claimed_user
        builder = flatbuffers.Builder(256)
        builder.Finish(envelope.Pack(builder), file_identifier=FILE_IDENTIFIER)
        self._socket.send(bytes(builder.Output()))

        deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.timeout_s)
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        if self._monitor is not None:
            poller.register(self._monitor, zmq.POLLIN)
        while True:
            self._read_handshakes()
            if self._refused:
                raise Refused(self.endpoint, self.public_key)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Unreachable(self.endpoint,
                                  timeout_s if timeout_s is not None else self.timeout_s)
            ready = dict(poller.poll(int(remaining * 1000)))
            if self._socket not in ready:
                continue
            frame = self._socket.recv()
            reply = self._parse(frame)
            if reply is None or reply.requestId not in (request_id, 0):
                continue
            if reply.bodyType == Body.Body.ErrorReply:
                code = reply.body.code
                name = _STATUS_NAMES[code] if 0 <= code < len(_STATUS_NAMES) else "INTERNAL"
                if name == "UNAUTHENTICATED":  # the key was removed after the handshake
                    raise Refused(self.endpoint, self.public_key, _text(reply.body.message))
                raise CohortError(name, _text(reply.body.message))
            if not isinstance(reply.body, reply_class):
                raise CohortError("DATA_LOSS", "unexpected reply "
                                  f"{_BODIES.get(reply.bodyType, reply.bodyType)}")
            return reply.body

    def _read_handshakes(self):
        while self._monitor is not None and self._monitor.poll(0, zmq.POLLIN):
            event = recv_monitor_message(self._monitor)
            if event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._refused = False
            # ZAP status 400: the key is not listed (300 and 500 are the server's own trouble).
            elif event["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH and event["value"] == 400:
                self._refused = True
                self._refused_at = time.monotonic()

    def _retry_if_refused(self):
        # ZeroMQ does not reconnect after a refusal: connect again a second later, in case the
        # key has been listed since.
        self._read_handshakes()
        if self._refused and time.monotonic() - self._refused_at >= 1.0:
            self._socket.disconnect(self.endpoint)
            self._socket.connect(self.endpoint)
            self._refused = False

    @staticmethod
    def _parse(frame):
        # The Python FlatBuffers runtime has no verifier: refuse what does not look like ours
        # and treat any decoding error as a bad frame rather than crashing the caller.
        if len(frame) < 8 or frame[4:8] != FILE_IDENTIFIER:
            return None
        try:
            envelope = Envelope.EnvelopeT.InitFromObj(Envelope.Envelope.GetRootAs(frame, 0))
        except Exception:  # noqa: BLE001 - any decoding failure means a bad frame
            return None
        if envelope.version != PROTOCOL_VERSION:
            return None
        return envelope


def _byte_vector(data):
    """`data` as the object API packs a [ubyte] fastest: a numpy array where numpy is there."""
    try:
        import numpy
    except ImportError:
        return list(data)
    return numpy.frombuffer(data, dtype=numpy.uint8)


class ExecSession:
    """An interactive command beside a running replica (Client.exec_session; `cohort exec -i`):
    a loop of steps (wire ExecSessionIo), each carrying the input queued since the last (at most
    64 KiB, and only while the command keeps up) and answered with its output since the last.
    Not thread-safe: one caller drives it. Used as a context manager, a command still running at
    its end is killed.

        with client.exec_session("train", ["python3", "-i"]) as repl:
            out, code = repl.communicate(b"import torch; print(torch.__version__)\n")
    """

    def __init__(self, client, job, argv, replica, tty, rows, cols):
        self._client = client
        self._job = job
        self._replica = replica
        self._start = (argv, bool(tty), int(rows), int(cols))
        self._session = 0
        self._input = bytearray()
        self._input_closed = False  # close_stdin() was asked
        self._input_close_sent = False
        self._input_pending = 0
        self._kill = False
        self._window = None
        self.returncode = None  # once ended: its exit status (128 + the signal that ended it)
        self._step()  # starts it: a bad job, replica or command raises here

    @property
    def running(self):
        return self.returncode is None

    def send(self, data):
        """Queues `data` (bytes, or str as UTF-8) for the command's stdin; it goes with the next
        steps (read(), communicate())."""
        if self._input_closed:
            raise ValueError("stdin is closed")
        self._input += data.encode() if isinstance(data, str) else bytes(data)

    def close_stdin(self):
        """Closes the command's stdin once the input queued has gone (its end of file)."""
        self._input_closed = True

    def resize(self, rows, cols):
        """A new window for a tty session, sent with the next step."""
        self._window = (int(rows), int(cols))

    def kill(self):
        """Ends the command now (SIGKILL) and waits for its end; returns its exit status."""
        while self.running:
            self._kill = True
            self._step()
        return self.returncode

    def read(self, timeout_s=None):
        """Steps until the command has written something, or ended, or `timeout_s` passed (None:
        no limit); returns what it wrote (b"" at the end or on the timeout)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self.running:
            output = self._step()
            if output:
                return output
            if deadline is not None and time.monotonic() >= deadline:
                break
        return b""

    def communicate(self, input=b"", timeout_s=None):
        """subprocess's communicate(): sends `input`, closes stdin, and reads until the command
        ends; returns (output, exit status). TimeoutError after `timeout_s` (None: no limit),
        the command still running (kill() ends it)."""
        if input:
            self.send(input)
        self.close_stdin()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        output = bytearray()
        while self.running:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"exec session in {self._job}: still running after "
                                   f"{timeout_s} s")
            output += self._step()
        return bytes(output), self.returncode

    def _step(self):
        body = ExecSessionIo.ExecSessionIoT()
        body.job = self._job
        body.replica = self._replica
        body.session = self._session
        if self._session == 0:
            body.argv, body.tty, rows, cols = self._start
            body.rows, body.cols = rows, cols
        if self._window is not None:
            body.rows, body.cols = self._window
            self._window = None
        if self._input and self._input_pending < EXEC_STEP_BYTES and not self._kill:
            chunk = bytes(self._input[:EXEC_STEP_BYTES])
            body.input = _byte_vector(chunk)
        else:
            chunk = b""
        if self._input_closed and not self._input_close_sent and len(chunk) == len(self._input):
            body.inputClosed = True
        body.kill = self._kill
        reply = self._client._exec_step(body)
        del self._input[:len(chunk)]
        self._input_close_sent = self._input_close_sent or bool(body.inputClosed)
        self._session = reply.session
        self._input_pending = reply.inputPending
        if not reply.running:
            self.returncode = reply.exitCode
        return bytes(reply.output) if reply.output is not None else b""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.running:
            self.kill()
