"""Drives a running coordinator through the Python client (python/cohort/client.py).

Run by integration_test's PythonClientRunsJobsAndStudies (see check_util.py).
"""

import datetime
import os
import pwd
import re
import time
import warnings

from check_util import check, run_checks
from cohort import Client, CohortError, CohortWarning
from cohort.client import _text


def check_refused(call, code, text, taken):
    """Checks that call() raises CohortError with `code` and `text` in its message; `taken` says
    what went wrong should it return instead."""
    try:
        call()
    except CohortError as e:
        check(e.code == code and text in str(e), f"error: {e}")
        return
    check(False, taken)


def main(endpoint, scratch):
    # A wire string that is not UTF-8 (which a coordinator older than its checks could send)
    # reads as text with U+FFFD, never raising in the caller's code.
    latin1 = _text(b"caf\xe9")
    check(latin1 == "caf\ufffd" and _text(b"ok") == "ok" and _text(None) == "",
          f"wire strings as text: {latin1!r}")
    # Two nodes and no output root: every job is warned of its output dir (checked below once).
    warnings.simplefilter("ignore", CohortWarning)
    with Client(endpoint, timeout_s=10.0) as client:
        nodes = client.nodes()
        check(len(nodes) == 2 and all(n["state"] == "READY" for n in nodes),
              f"two READY nodes: {nodes}")
        check(nodes[0]["labels"] == "", f"a node started without --label has none: {nodes}")
        check(nodes[0]["agent_started_ms"] > 0, f"its agent's start, from its uptime: {nodes}")
        check(nodes[0]["version"] != "" and nodes[0]["version"] == nodes[1]["version"],
              f"each node says its agent's version, this build's: {nodes}")
        check(all(n["unhealthy"] == "" for n in nodes),
              f"a node without --health-check is never unhealthy: {nodes}")
        check(all(n["unhealthy_gpus"] == [] and n["cordoned_gpus"] == [] for n in nodes),
              f"a node without NVML finds no GPU unfit, and none is cordoned: {nodes}")
        # An admin's label edits (no --admins here: every client may), and their reset.
        node = nodes[0]["node_id"]
        message, info = client.admin_node(node, "label", ["py=yes", "gone-"])
        check(info["labels"] == "py=yes" and info["label_edits"] == "gone-,py=yes",
              f"labelled: {message}, {info}")
        # nodes(selector=): the coordinator matches Kubernetes' selector strings.
        other = nodes[1]["node_id"]
        for selector, expected in (("py=yes", [node]), ("py", [node]), ("!py", [other]),
                                   ("py in (no, maybe)", []), ("", [node, other])):
            got = sorted(n["node_id"] for n in client.nodes(selector=selector))
            check(got == sorted(expected),
                  f"nodes(selector={selector!r}): {got}, expected {expected}")
        check_refused(lambda: client.nodes(selector="py in (yes"),
                      "INVALID_ARGUMENT", "selector: ", "a malformed selector was taken")
        check_refused(lambda: client.backup(), "FAILED_PRECONDITION", "--backup-dir",
                      "a coordinator without --backup-dir took a backup")
        message, info = client.admin_node(node, "label-reset")
        check(info["labels"] == "" and info["label_edits"] == "", f"reset: {message}, {info}")
        check_refused(lambda: client.admin_node(node, "label", ["py"]),
                      "INVALID_ARGUMENT", "got 'py'", "a label edit without = or - was taken")
        check_refused(lambda: client.admin_node(node, "cordon", gpus=[0]),
                      "INVALID_ARGUMENT", "has 0 GPUs: 0 is none of them",
                      "a cordon of a GPU the node lacks was taken")
        # A cordon keeps a note of why, who (the account this client claims) and since when,
        # which the uncordon ends.
        message, info = client.admin_node(other, "cordon", reason="disk swap")
        check(info["state"] == "CORDONED" and info["admin_reason"] == "disk swap"
              and info["admin_by"] == pwd.getpwuid(os.geteuid()).pw_name
              and info["admin_since_ms"] > 0, f"cordoned with a reason: {message}, {info}")
        check([n["admin_reason"] for n in client.nodes() if n["node_id"] == other]
              == ["disk swap"],
              f"nodes() shows the reason: {client.nodes()}")
        check_refused(lambda: client.admin_node(other, "uncordon", reason="done"),
                      "INVALID_ARGUMENT", "only cordon, drain and drain-now keep a reason",
                      "a reason with uncordon was taken")
        message, info = client.admin_node(other, "uncordon")
        check(info["state"] == "READY" and info["admin_reason"] == ""
              and info["admin_since_ms"] == 0, f"uncordoned: {message}, {info}")
        # The node's history, asked for: its registration, the cordon and the uncordon, in order.
        me = pwd.getpwuid(os.geteuid()).pw_name
        history = [n["events"] for n in client.nodes(events_of=other) if n["node_id"] == other][0]
        texts = [e["text"] for e in history]
        check(texts[0].startswith("registered: cohort-agent ")
              and texts[-2:] == [f"cordoned by {me}: disk swap", f"uncordoned by {me}"]
              and [e["seq"] for e in history] == list(range(1, len(history) + 1)),
              f"the node's events: {history}")
        check(all(n["events"] == [] for n in client.nodes()), "events came unasked for")

        job = ("name: py_job\n"
               "worker_pools:\n"
               "  - role: chief\n"
               "    replicas: 1\n"
               "    process: {command: [/bin/sh, -c, 'echo hello from $CLOUD_ML_JOB_ID; echo "
               "rank=$RANK']}\n")
        name = client.submit(job)
        check(name == "py_job", f"submit returned {name!r}")
        done = client.wait(name, poll_s=0.1, timeout_s=30)
        check(done["state"] == "SUCCEEDED", f"job ended {done['state']}: {done['message']}")
        check(done["replicas"][0]["replica"] == "chief-0", f"replicas: {done['replicas']}")
        # In plaintext the client claims its account name: the job's owner, checked on cancel.
        me = pwd.getpwuid(os.geteuid()).pw_name
        check(done["owner"] == me, f"owner {done['owner']!r}, not this account {me!r}")
        with Client(endpoint, timeout_s=10.0, user="not_" + me) as other:
            check_refused(lambda: other.cancel(name),
                          "PERMISSION_DENIED", f"owned by {me}", "another user cancelled py_job")
        check(any(j["name"] == "py_job" for j in client.list_jobs()), "py_job listed")
        # A history query, as `cohort list --state --since --limit`.
        finished = client.list_jobs(states=["succeeded"], since=datetime.timedelta(hours=1))
        check([j["name"] for j in finished] == ["py_job"], f"succeeded in the last hour: {finished}")
        check(client.list_jobs(states="RUNNING") == [], "none running")
        check(client.list_jobs(since=time.time() + 3600) == [], "none submitted in the future")
        check(len(client.list_jobs(limit=1)) == 1, "limit")
        try:
            client.list_jobs(states=["DONE"])
            check(False, "an unknown state was taken")
        except ValueError as e:
            check("unknown ['DONE']" in str(e), f"error: {e}")
        check_refused(lambda: client.suspend(name),
                      "FAILED_PRECONDITION", "SUCCEEDED", "a finished job was suspended")

        # Suspended, a running job's replica stops and the job waits; resumed, it is queued.
        sleeper = client.submit("name: py_sleeper\nworker_pools:\n  - role: chief\n"
                                "    process: {command: [/bin/sleep, '120']}\n")
        client.wait(sleeper, poll_s=0.1, timeout_s=30,
                    until=lambda j: j["state"] == "RUNNING")
        suspended = client.suspend(sleeper)
        check(suspended["state"] == "SUSPENDED" and "suspended by" in suspended["message"],
              f"after suspend: {suspended['state']}: {suspended['message']}")
        stopped = client.wait(sleeper, poll_s=0.1, timeout_s=30,
                              until=lambda j: j["replicas"][0]["state"] == "STOPPED")
        check(stopped["state"] == "SUSPENDED" and stopped["restarts"] == 0,
              f"after the stop: {stopped['state']}, {stopped['restarts']} restarts")
        # The coordinator's build: the release, then the commit where built from a checkout.
        version = client.coordinator_version()
        check(re.fullmatch(r"\d+\.\d+\.\d+(\+g[0-9a-f]{12}(\.dirty)?)?", version) is not None,
              f"coordinator_version() = {version!r}")
        queues = client.queues()
        check([q["name"] for q in queues] == ["default"] and queues[0]["suspended"] == 1
              and queues[0]["running"] == 0 and queues[0]["gpu_idle_limit_ms"] == 0
              and queues[0]["cpus_per_gpu"] == 0 and queues[0]["memory_mb_per_gpu"] == 0,
              f"queues with py_sleeper suspended: {queues}")
        resumed = client.resume(sleeper)
        check(resumed["state"] == "QUEUED", f"after resume: {resumed['state']}")
        moved = client.update(sleeper, priority="low")
        check(moved["priority"] == "low" and moved["queue"] == "default"
              and "updated by" in moved["events"][-1]["message"], f"after update: {moved}")
        check_refused(lambda: client.update(sleeper, queue="nowhere"),
                      "INVALID_ARGUMENT", "no queue named 'nowhere'", "an unknown queue was taken")
        client.cancel(sleeper)
        # scheduling.hold: SUSPENDED from its submission, after py_job's end however it ended.
        held = client.submit("name: py_held\nworker_pools:\n  - role: chief\n"
                             "    process: {command: [/bin/true]}\n"
                             "scheduling: {hold: true, after: ['py_job:ended']}\n")
        held_job = client.get_job(held)
        check(held_job["state"] == "SUSPENDED" and "scheduling.hold" in held_job["message"],
              f"a held job: {held_job['state']}: {held_job['message']}")
        client.cancel(held)
        # The same as a dict, with submit's keywords: the coordinator renames it, adds to its
        # after and holds it; its warning (two nodes, no output root) comes as a CohortWarning.
        spec = {"name_prefix": "py", "output_dir": os.path.join(scratch, "py_dict"),
                "worker_pools": [{"role": "chief", "process": {"command": ["/bin/true"]}}],
                "scheduling": {"after": ["py_job"]}}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            named = client.submit(spec, name="py_dict", after="py_held:ended", hold=True)
        check(named == "py_dict", f"submit with name= returned {named!r}")
        dict_job = client.get_job(named)
        check(dict_job["state"] == "SUSPENDED", f"held: {dict_job['state']}")
        check([str(w.message) for w in caught if issubclass(w.category, CohortWarning)
               and "is not on checked shared storage" in str(w.message)] != [],
              f"the storage warning: {[str(w.message) for w in caught]}")
        client.cancel(named)
        # A dry run of the same: checked and forecast as submit would, stored nowhere.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            plan = client.dry_run(spec, name="py_dry")
        check(plan["name"] == "py_dry" and plan["outcome"] == "START"
              and [r["replica"] for r in plan["replicas"]] == ["chief-0"]
              and plan["replicas"][0]["node_id"] != "" and plan["queue"] == "default"
              and plan["defaults"] == [],
              f"a dry run: {plan}")
        check([w for w in caught if "is not on checked shared storage" in str(w.message)] != [],
              f"a dry run's warning: {[str(w.message) for w in caught]}")
        check_refused(lambda: client.get_job("py_dry"),
                      "NOT_FOUND", "", "a dry run stored its job")
        held_plan = client.dry_run(spec, name="py_dry", hold=True)
        check(held_plan["outcome"] == "HOLD" and "cohort resume py_dry" in held_plan["reason"],
              f"a held dry run: {held_plan}")
        array_plan = client.dry_run(spec, name="py_dry", array="0-9%3")
        check(array_plan["name"] == "py_dry-0" and array_plan["outcome"] == "START"
              and [t["name"] for t in array_plan["tasks"]] == ["py_dry-0", "py_dry-1", "py_dry-2"]
              and all(t["outcome"] in ("START", "WAIT") for t in array_plan["tasks"]),
              f"an array's dry run: {array_plan}")
        # A Vertex AI CustomJob, as google-cloud-aiplatform's to_dict() gives one: taken as it
        # is, with the keywords; what has no counterpart comes as a CohortWarning.
        vertex = {"displayName": "py vertex", "labels": {"team": "py"}, "jobSpec": {
            "workerPoolSpecs": [{"replicaCount": "1",
                                 "machineSpec": {"machineType": "n1-standard-4"},
                                 "containerSpec": {"imageUri": "/no/such/image",
                                                   "args": ["--epochs=1"]}}],
            "baseOutputDirectory": {"outputUriPrefix": os.path.join(scratch, "py_vertex")}}}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from_vertex = client.submit(vertex, name="py_vertex", hold=True,
                                        env={"LR": "3e-4"}, args=["--lr=3e-4"],
                                        labels={"sweep": "lr"})
        check(from_vertex == "py_vertex", f"a Vertex job submitted as {from_vertex!r}")
        check(client.get_job(from_vertex)["state"] == "SUSPENDED", "the Vertex job is held")
        # Its labels are the job's, with submit's labels= (`--label`), and select it (`cohort
        # list -l`).
        check(client.get_job(from_vertex)["labels"] == {"sweep": "lr", "team": "py"},
              f"the Vertex job's labels: {client.get_job(from_vertex)['labels']}")
        check([j["name"] for j in client.list_jobs(selector="team=py")] == [from_vertex],
              "list_jobs(selector=...) selects the labelled job alone")
        check(client.list_jobs(selector="team=nobody") == [], "a selector no job matches")
        check_refused(lambda: client.list_jobs(selector="team in py"),
                      "INVALID_ARGUMENT", "selector: ", "a malformed selector was taken")
        check([str(w.message) for w in caught
               if "workerPoolSpecs[0].machineSpec.machineType" in str(w.message)] != [],
              f"the Vertex note: {[str(w.message) for w in caught]}")
        stored = client.get_job_spec(from_vertex)
        check("name: py_vertex" in stored and "/no/such/image" in stored and "--epochs=1" in stored,
              f"the stored job file of a Vertex job: {stored!r}")
        check(re.search(r"LR: [\"']?3e-4", stored) is not None and
              stored.index("--epochs=1") < stored.index("--lr=3e-4"),
              f"env and args of submit() in the stored job file: {stored!r}")
        client.cancel(from_vertex)
        # A job array (submit's array=): its tasks by index, one at a time, the others waiting
        # their turn; cancelled together.
        array = client.submit("name: py_array\nworker_pools:\n  - role: chief\n"
                              "    process: {command: [/bin/sleep, '60']}\n", array="0-2%1")
        check(array == "py_array", f"an array submitted as {array!r}")
        tasks = client.array_tasks(array)
        check([t["name"] for t in tasks] == ["py_array-0", "py_array-1", "py_array-2"]
              and tasks[2]["labels"] == {"cohort/array": "py_array", "cohort/array-index": "2"},
              f"the array's tasks: {[(t['name'], t['labels']) for t in tasks]}")
        check(tasks[2]["state"] == "QUEUED"
              and "waiting for its turn in array py_array" in tasks[2]["message"],
              f"a task waiting its turn: {tasks[2]['state']}: {tasks[2]['message']}")
        listed = [a for a in client.arrays() if a["name"] == array]
        check(len(listed) == 1 and listed[0]["state"] == "ACTIVE" and listed[0]["tasks"] == 3
              and listed[0]["array"] == "0-2%1" and listed[0]["parallelism"] == 1
              and listed[0]["in_flight"] == 1 and listed[0]["by_state"].get("QUEUED", 0) >= 2,
              f"arrays(): {listed}")
        one = client.array(array)
        check(one["array"] == array and one["summary"]["state"] == "ACTIVE"
              and one["summary"]["array"] == "0-2%1" and one["summary"]["tasks"] == 3
              and [t["name"] for t in one["tasks"]] == [t["name"] for t in tasks],
              f"array(): {one['summary']}, {[t['name'] for t in one['tasks']]}")
        # The array's job file (`cohort status ARRAY --spec`): the array as submitted, which
        # submit() takes again under another name.
        array_file = client.get_job_spec(array)
        check('name: "py_array"\n' in array_file and 'array: "0-2%1"' in array_file
              and "array_index" not in array_file, f"the array's job file: {array_file!r}")
        again = client.dry_run(array_file, name="py_again")
        check(len(again.get("tasks", [])) == 1, f"the array's file again, a dry run: {again}")
        check_refused(lambda: client.get_job_spec("py_no_array"),
                      "NOT_FOUND", "no job or array named 'py_no_array'", "a spec of nothing")
        suspended = client.suspend_array(array)
        check([t["state"] for t in suspended] == ["SUSPENDED"] * 3,
              f"after suspend_array: {[t['state'] for t in suspended]}")
        moved = client.update_array(array, priority="high")
        check([t["priority"] for t in moved] == ["high"] * 3,
              f"after update_array: {[t['priority'] for t in moved]}")
        resumed = client.resume_array(array)
        check([t["state"] for t in resumed] == ["QUEUED"] * 3,
              f"after resume_array: {[t['state'] for t in resumed]}")
        cancelled = client.cancel_array(array)
        check([t["state"] for t in cancelled[1:]] == ["CANCELLED", "CANCELLED"]
              and cancelled[0]["state"] in ("CANCELLING", "CANCELLED"),
              f"after cancel_array: {[t['state'] for t in cancelled]}")
        ended = client.wait_array(array, poll_s=0.1, timeout_s=30)
        check([t["state"] for t in ended] == ["CANCELLED"] * 3,
              f"after wait_array: {[t['state'] for t in ended]}")
        listed = [a for a in client.arrays() if a["name"] == array]
        check(listed and listed[0]["state"] == "CANCELLED"
              and listed[0]["by_state"] == {"CANCELLED": 3} and listed[0]["end_time_ms"] > 0,
              f"arrays() once every task ended: {listed}")
        check_refused(lambda: client.array("py_no_array"),
                      "NOT_FOUND", "no array named 'py_no_array'", "found no array")
        check(client.array_tasks("py_no_array") == [], "array_tasks() of no array")
        check_refused(lambda: client.wait_array("py_no_array"),
                      "NOT_FOUND", "no array named 'py_no_array'", "waited for no array")
        check_refused(lambda: client.cancel_array("py_no_array"),
                      "NOT_FOUND", "no array named 'py_no_array'", "an unknown array was cancelled")
        check_refused(lambda: client.submit(spec, array="5-2"),
                      "INVALID_ARGUMENT", "'5-2' ends before it starts", "a bad array was taken")
        check_refused(lambda: client.submit(spec, name="9lives"),
                      "INVALID_ARGUMENT", "'9lives' is not a valid job name",
                      "an invalid name was taken")
        check_refused(lambda: client.submit(spec, env={"1X": "2"}),
                      "INVALID_ARGUMENT", "'1X' is not an environment variable",
                      "an invalid env name was taken")
        check_refused(lambda: client.submit(spec, after=["py_job:maybe"]),
                      "INVALID_ARGUMENT", "after: ", "an invalid after was taken")
        text, complete = b"", False
        for _ in range(100):
            data, offset, complete = client.read_logs("py_job", "chief-0", len(text))
            text += data
            if complete:
                break
        check(b"rank=0" in text, f"the chief's log: {text!r}")
        # Followed from a queued job's submission to its end: every line, in order, then done.
        counter = client.submit("name: py_counter\nworker_pools:\n  - role: chief\n"
                                "    process: {command: [/bin/sh, -c, 'for i in 1 2 3; do "
                                "echo line $i; sleep 0.2; done']}\n")
        followed = b"".join(client.follow_logs(counter, poll_s=0.05, timeout_s=30))
        check(followed.count(b"line ") == 3 and followed.index(b"line 1") <
              followed.index(b"line 2") < followed.index(b"line 3"),
              f"followed: {followed!r}")
        check(client.get_job(counter)["state"] == "SUCCEEDED", "py_counter ended")
        # A cancelled job's log is complete; a running one's is followed until the timeout.
        check(b"".join(client.follow_logs(sleeper, poll_s=0.05, timeout_s=10)) == b"",
              "py_sleeper printed nothing")
        quiet = client.submit("name: py_quiet\nworker_pools:\n  - role: chief\n"
                              "    process: {command: [/bin/sleep, '60']}\n")
        try:
            list(client.follow_logs(quiet, poll_s=0.05, timeout_s=0.3))
            check(False, "a running job's log was complete")
        except TimeoutError as e:
            check("py_quiet chief-0" in str(e), f"error: {e}")
        # What it uses, as `cohort top`: its row, with usage once its agent's heartbeat said.
        rows = []
        for _ in range(200):
            rows = client.top(quiet)
            if rows and rows[0]["usage"] is not None:
                break
            time.sleep(0.05)
        check([(r["job"], r["replica"]) for r in rows] == [(quiet, "chief-0")], f"top: {rows}")
        check(rows[0]["usage"] is not None and rows[0]["usage"]["gpus"] == [], f"usage: {rows}")
        check(any(r["job"] == quiet for r in client.top()), f"top of all: {client.top()}")
        # Its node's usage counts it (`cohort top --nodes`).
        node = rows[0]["node_id"]
        used = [n["usage"] for n in client.nodes() if n["node_id"] == node]
        check(len(used) == 1 and used[0] is not None and used[0]["replicas"] >= 1 and
              used[0]["gpus"] == [], f"usage of {node}: {used}")
        # And names it among those holding part of it (`cohort nodes NODE`).
        holders = client.node(node)["holders"]
        check({"job": quiet, "replica": "chief-0", "state": "RUNNING", "gpus": [], "cpus": 1,
               "memory_mb": 0} in holders, f"holders of {node}: {holders}")
        check_refused(lambda: client.node(node + "x"), "NOT_FOUND",
                      f"no node '{node}x' (did you mean '{node}'?)", "an unknown node was found")
        client.cancel(quiet)

        check_refused(lambda: client.submit("name: bad\nworker_pools: []\n"),
                      "INVALID_ARGUMENT", "worker_pools", "an invalid job was accepted")
        check_refused(lambda: client.get_job("no_such_job"),
                      "NOT_FOUND", "", "an unknown job was found")

        # Each trial reports through the Python reporter (cohort.hypertune), as training code does.
        metric_writer = os.path.join(scratch, "py_trial.py")
        with open(metric_writer, "w") as f:
            f.write("import sys\n"
                    "from cohort import hypertune\n"
                    "import os\n"
                    "flags = dict(a[2:].split('=', 1) for a in sys.argv[1:])\n"
                    "x = float(flags['x']) + float(flags.get('bonus', 0))"
                    " + float(os.environ.get('OFFSET', 0))\n"
                    "hypertune.HyperTune().report_hyperparameter_tuning_metric(\n"
                    "    hyperparameter_metric_tag='score', metric_value=x, global_step=1)\n")
        study = ("name: py_study\n"
                 "metric: {id: score, goal: minimize}\n"
                 "parameters:\n"
                 "  - {id: x, type: discrete, values: [3, 1, 2]}\n"
                 "algorithm: grid\n"
                 "max_trials: 3\n"
                 "parallel_trials: 2\n"
                 "trial_job:\n"
                 "  output_dir: " + os.path.join(scratch, "py_study") + "\n"
                 "  worker_pools:\n"
                 "    - role: chief\n"
                 "      replicas: 1\n"
                 "      process:\n"
                 "        command: [/usr/bin/python3, " + metric_writer + "]\n"
                 "        env: {PYTHONPATH: " + os.environ["PYTHONPATH"] + "}\n")
        check(client.submit_study(study) == "py_study", "submit_study returned the name")
        result = client.wait_study("py_study", poll_s=0.1, timeout_s=40)
        check(result["state"] == "SUCCEEDED", f"study ended {result['state']}: {result['message']}")
        check(len(result["trials"]) == 3, f"trials: {result['trials']}")
        best = [t for t in result["trials"] if t["id"] == result["best_trial"]]
        check(len(best) == 1 and best[0]["parameters"] == {"x": "1"} and
              best[0]["final_metric"] == 1.0, f"best trial (minimize): {best}")
        check([s["name"] for s in client.list_studies()] == ["py_study"], "list_studies")
        # The best trial's job reported its score once, as `cohort metrics` shows it.
        points = client.metrics(best[0]["job"])
        check(len(points) == 1 and points[0]["tag"] == "score" and points[0]["value"] == 1.0
              and points[0]["step"] == 1 and points[0]["replica"] == "chief-0"
              and points[0]["time_ms"] > 0, f"the best trial's metrics: {points}")
        check_refused(lambda: client.metrics("no_such_job"),
                      "NOT_FOUND", "", "metrics of an unknown job")
        # Usage, as `cohort usage`: this account's jobs in the default queue, py_job among them.
        rows = client.usage(user=me, since=datetime.timedelta(hours=1))
        check(len(rows) == 1 and rows[0]["user"] == me and rows[0]["queue"] == "default"
              and rows[0]["jobs"] >= 4 and rows[0]["gpu_hours"] == 0.0
              and rows[0]["cpu_hours"] > 0.0, f"usage: {rows}")
        check(client.usage(user="nobody_here") == [], "no usage of another user")
        # By a label's value (`--by-label`): py_vertex is team py's one job; the jobs without
        # the label make the last row. A selector keeps the jobs it matches.
        by_team = client.usage(by_label="team")
        check(by_team[0]["label"] == "py" and by_team[0]["jobs"] == 1
              and by_team[-1]["label"] is None and by_team[-1]["jobs"] >= 4
              and "user" not in by_team[0], f"usage by team: {by_team}")
        swept = client.usage(selector="sweep=lr")
        check(len(swept) == 1 and swept[0]["user"] == me and swept[0]["jobs"] == 1,
              f"usage of sweep=lr: {swept}")
        check_refused(lambda: client.usage(by_label="te am"),
                      "INVALID_ARGUMENT", "by_label: label key 'te am'", "a bad label key was taken")
        check_refused(lambda: client.submit(vertex, name="py_vertex2", labels={"team": "p y"}),
                      "INVALID_ARGUMENT", "label value 'p y'", "a bad label was taken")
        check_refused(lambda: client.submit_study(study),
                      "ALREADY_EXISTS", "", "a duplicate study was accepted")
        # A Vertex AI HyperparameterTuningJob dict: its fields with no counterpart come as
        # CohortWarnings, as a CustomJob's do.
        tuning = {"displayName": "py_tuning", "maxTrialCount": 1, "studySpec": {
            "metrics": [{"metricId": "score", "goal": "MINIMIZE"}],
            "parameters": [{"parameterId": "x", "discreteValueSpec": {"values": [1]}}],
            "measurementSelectionType": "LAST_MEASUREMENT"},
            "trialJobSpec": {"workerPoolSpecs": [{
                "replicaCount": 1, "machineSpec": {"machineType": "n1-standard-4"},
                "containerSpec": {"imageUri": "/no/such/image"}}]}}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check(client.submit_study(tuning) == "py_tuning", "a Vertex tuning job's study name")
        check([str(w.message) for w in caught if issubclass(w.category, CohortWarning)
               and "machineSpec.machineType" in str(w.message)] != [],
              f"the Vertex tuning note: {[str(w.message) for w in caught]}")
        stored = client.get_study_spec("py_tuning")
        check('name: "py_tuning"' in stored and "image: /no/such/image" in stored,
              f"the stored study file of a Vertex tuning job: {stored!r}")
        client.cancel_study("py_tuning")
        # The same file under another name, as `cohort tune --name`.
        check(client.submit_study(study, name="py_study_2") == "py_study_2",
              "submit_study(name=...) names the study")
        client.cancel_study("py_study_2")
        # env, labels and args, as `cohort tune --env K=V --label K=V -- ARGS`: in every trial
        # (the args before its parameters).
        check(client.submit_study(study, name="py_study_3", env={"OFFSET": 10},
                                  args=["--bonus=100"], labels={"sweep": "py3"}) == "py_study_3",
              "submit_study(env=..., args=..., labels=...) returned the name")
        result = client.wait_study("py_study_3", poll_s=0.1, timeout_s=40)
        check(result["state"] == "SUCCEEDED" and
              sorted(t["final_metric"] for t in result["trials"]) == [111.0, 112.0, 113.0],
              f"trials with OFFSET=10 and --bonus=100: {result['trials']}")
        labelled = sorted(j["name"] for j in client.list_jobs(selector="sweep=py3"))
        check(labelled == sorted(t["job"] for t in result["trials"]),
              f"the trial jobs labelled sweep=py3: {labelled}")
        stored = client.get_study_spec("py_study_3")
        check("OFFSET" in stored and "--bonus=100" in stored,
              f"the stored study file holds the env and args: {stored!r}")
        check_refused(lambda: client.submit_study(study, name="py_study_4", env={"1X": "a"}),
                      "INVALID_ARGUMENT", "'1X' is not an environment variable",
                      "a bad env name in a study was accepted")
        check_refused(lambda: client.submit_study(study, name="2nd"),
                      "INVALID_ARGUMENT", "not a valid study name",
                      "an invalid study name was accepted")


if __name__ == "__main__":
    run_checks(main, "python client")
