"""Cohort: submit and watch training jobs on a Cohort cluster from Python."""

from cohort.client import Client, CohortError, Unreachable

__all__ = ["Client", "CohortError", "Unreachable"]
