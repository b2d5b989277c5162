#!/usr/bin/python3
"""A replica program for Cohort's integration tests.

Every replica writes its whole environment as JSON to OUT/env-<type>-<index>.json (type and index
from TF_CONFIG's task) and prints a start line to its log. Then:
  chief:   waits until EXPECT env files exist (every replica started), then by --mode:
           ok -> exit 0; fail -> exit 1; wait -> exit 0 once the file --release exists;
           sleep -> sleep until stopped (at most --max-seconds).
  others:  sleep until stopped (at most --max-seconds), then exit 0; with --finish-after=S, sleep
           S seconds, write OUT/finished-<type>-<index> and exit 0 (a rank's own last work).
--marker=... is only there so the test can find this process in /proc.
"""
import json
import os
import sys
import time


def main():
    args = {}
    for arg in sys.argv[1:]:
        if arg.startswith("--") and "=" in arg:
            key, value = arg[2:].split("=", 1)
            args[key] = value
    out = args["out"]
    mode = args.get("mode", "ok")
    expect = int(args.get("expect", "1"))
    max_seconds = float(args.get("max-seconds", "60"))
    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task = tf_config.get("task", {})
    name = "%s-%s" % (task.get("type", "unknown"), task.get("index", "x"))

    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "env-%s.json" % name)
    with open(path + ".tmp", "w") as f:
        json.dump(dict(os.environ), f)
    os.rename(path + ".tmp", path)
    print("probe %s started rank=%s world=%s" % (name, os.environ.get("RANK"),
                                                  os.environ.get("WORLD_SIZE")), flush=True)
    print("probe %s stderr line" % name, file=sys.stderr, flush=True)

    deadline = time.monotonic() + max_seconds
    if task.get("type") != "chief":
        if "finish-after" in args:
            time.sleep(float(args["finish-after"]))
            with open(os.path.join(out, "finished-%s" % name), "w") as f:
                f.write("done\n")
            print("probe %s finished" % name, flush=True)
            return 0
        while time.monotonic() < deadline:
            time.sleep(0.1)
        return 0

    while time.monotonic() < deadline:
        started = [f for f in os.listdir(out) if f.startswith("env-") and f.endswith(".json")]
        if len(started) >= expect:
            break
        time.sleep(0.05)
    print("probe %s saw %d replicas, mode %s" % (name, expect, mode), flush=True)
    if mode == "fail":
        print("probe chief failing on purpose", flush=True)
        return 1
    if mode == "wait":
        release = args["release"]
        while time.monotonic() < deadline and not os.path.exists(release):
            time.sleep(0.05)
        return 0 if os.path.exists(release) else 3
    if mode == "sleep":
        while time.monotonic() < deadline:
            time.sleep(0.1)
        return 0
    print("probe chief done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
