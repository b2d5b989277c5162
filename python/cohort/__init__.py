"""Cohort: submit and watch training jobs on a Cohort cluster from Python (cohort.client), and
all-reduce from training code over the Reduction Server or the ring (cohort.collective)."""

__all__ = ["Client", "CohortError", "CohortWarning", "Refused", "Unreachable",
           "load_client_config"]


def __getattr__(name):
    # The client's names load on first use: cohort.torch and cohort.collective need neither pyzmq
    # nor flatbuffers, which a pip environment with torch often lacks.
    if name in __all__:
        from cohort import client
        return getattr(client, name)
    raise AttributeError(f"module 'cohort' has no attribute {name!r}")
