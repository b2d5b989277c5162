"""The Python client reads the client config file the CLI reads (python/cohort/client.py,
common/client_config.h), and its arguments and the environment override it.

Run by day2_test's ClientConfigIsReadByTheCliAndThePythonClient (see check_util.py).
"""

import os
import socket

from check_util import check, run_checks
from cohort import Client, CohortError, Unreachable, load_client_config


def free_endpoint():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def unreachable(**kwargs):
    try:
        with Client(**kwargs) as client:
            client.nodes()
    except Unreachable:
        return True
    return False


def main(endpoint, scratch):
    for name in ("COHORT_COORDINATOR", "COHORT_INSECURE", "COHORT_KEY", "COHORT_SERVER_KEY"):
        os.environ.pop(name, None)
    config = os.path.join(scratch, "client.conf")
    with open(config, "w") as f:
        f.write(f"# the test cluster\ncoordinator = {endpoint}\ninsecure = true\n"
                "key = ~/never-read.key\ntimeout = 10s\n")
    os.environ["COHORT_CLIENT_CONFIG"] = config
    values = load_client_config()
    check(values["coordinator"] == endpoint and values["insecure"] is True
          and values["timeout"] == 10.0 and not values["key"].startswith("~"), f"read: {values}")

    # Everything from the file: its endpoint, plaintext (the key it names is not read).
    with Client() as client:
        check(client.endpoint == endpoint and client.timeout_s == 10.0, "file's endpoint, timeout")
        nodes = client.nodes()
        check(len(nodes) >= 1, f"nodes through the file's endpoint: {nodes}")

    # Plaintext reads no key: COHORT_KEY (naming no file here) is ignored when insecure.
    os.environ["COHORT_KEY"] = os.path.join(scratch, "no-such.key")
    with Client(insecure=True) as client:
        check(client.public_key is None and len(client.nodes()) >= 1, "insecure ignores COHORT_KEY")
    del os.environ["COHORT_KEY"]

    # An argument overrides the file, and the environment does.
    check(unreachable(endpoint=free_endpoint(), timeout_s=0.5), "endpoint argument wins")
    os.environ["COHORT_COORDINATOR"] = free_endpoint()
    check(unreachable(timeout_s=0.5), "COHORT_COORDINATOR wins over the file")
    del os.environ["COHORT_COORDINATOR"]

    # A bad file and a missing named file are errors naming them.
    def refused(text, what):
        """The CohortError a client config of `text` raises."""
        with open(config, "w") as f:
            f.write(text)
        try:
            Client()
        except CohortError as e:
            return e
        raise AssertionError(what)

    e = refused("coordinator = tcp://x:1\ncolour = blue\n", "an unknown name was accepted")
    check(e.code == "INVALID_ARGUMENT" and "client.conf:2" in str(e), f"error: {e}")
    e = refused("timout = 5s\n", "a misspelt name was accepted")
    check("client.conf:1: unknown name 'timout' (did you mean 'timeout'?)" in str(e),
          f"the name meant is named: {e}")
    os.environ["COHORT_CLIENT_CONFIG"] = os.path.join(scratch, "missing.conf")
    try:
        Client()
        raise AssertionError("a missing named config was accepted")
    except CohortError as e:
        check("missing.conf" in str(e), f"error: {e}")


if __name__ == "__main__":
    run_checks(main, "client config")
