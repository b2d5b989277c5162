"""Cohort: submit and watch training jobs on a Cohort cluster from Python (cohort.client), and
all-reduce from training code over the Reduction Server or the ring (cohort.collective)."""

from cohort.client import Client, CohortError, Refused, Unreachable, load_client_config

__all__ = ["Client", "CohortError", "Refused", "Unreachable", "load_client_config"]
