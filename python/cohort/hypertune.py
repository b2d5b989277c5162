"""Report hyperparameter-tuning metrics from a Cohort trial, as cloudml-hypertune does.

A drop-in for ``import hypertune``::

    from cohort import hypertune
    hpt = hypertune.HyperTune()
    hpt.report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="accuracy", metric_value=0.91, global_step=100)

Each report appends one JSON line to ``$CLOUD_ML_HP_METRIC_FILE`` (default
``/tmp/hypertune/output.metrics``), every value but the timestamp a string::

    {"accuracy": "0.91", "checkpoint_path": "", "global_step": "100", "timestamp": 1.7e9, "trial": "3"}

The Cohort agent tails the file and forwards each line to the coordinator (common/hypertune.h).
Unlike the stock library, which rewrites the file with its last 100 entries on every report, this
one appends a single line with one ``write(2)`` on an ``O_APPEND`` descriptor, so the tailer never
misses or half-reads a line. Standard library only; importable without the rest of the package.
"""

import json
import os
import threading
import time

DEFAULT_METRIC_PATH = "/tmp/hypertune/output.metrics"
DEFAULT_HYPERPARAMETER_METRIC_TAG = "training/hptuning/metric"

__all__ = ["HyperTune", "DEFAULT_METRIC_PATH", "DEFAULT_HYPERPARAMETER_METRIC_TAG"]


class HyperTune(object):
    """Writes metric lines for the current trial ($CLOUD_ML_TRIAL_ID)."""

    def __init__(self, metric_path=None, trial_id=None):
        self.metric_path = metric_path or os.environ.get(
            "CLOUD_ML_HP_METRIC_FILE") or DEFAULT_METRIC_PATH
        self.trial_id = trial_id if trial_id is not None else os.environ.get(
            "CLOUD_ML_TRIAL_ID", "0")
        self._lock = threading.Lock()
        directory = os.path.dirname(self.metric_path)
        if directory:
            os.makedirs(directory, exist_ok=True)

    def report_hyperparameter_tuning_metric(self, hyperparameter_metric_tag, metric_value,
                                            global_step=None, checkpoint_path=""):
        """Appends one measurement: the metric's value at global_step (0 when None)."""
        metric_value = float(metric_value)
        metric_tag = hyperparameter_metric_tag or DEFAULT_HYPERPARAMETER_METRIC_TAG
        body = {
            "timestamp": time.time(),
            "trial": str(self.trial_id),
            metric_tag: repr(metric_value),
            "global_step": str(int(global_step) if global_step else 0),
            "checkpoint_path": checkpoint_path or "",
        }
        line = (json.dumps(body, sort_keys=True) + "\n").encode("utf-8")
        with self._lock:
            fd = os.open(self.metric_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                written = os.write(fd, line)
                if written != len(line):
                    raise OSError("short write to %s" % self.metric_path)
            finally:
                os.close(fd)
