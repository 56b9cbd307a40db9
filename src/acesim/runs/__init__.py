"""Running experiments: resolve a case once, run it, compare endpoint kinds on it.

* :mod:`.case`: a system, a workload and run options, resolved once (:func:`make_case`);
* :mod:`.single`: one run (:func:`run`, :func:`run_system`; ``search`` over an endpoint kind's
  variants);
* :mod:`.compare`: endpoint kinds side by side, each in its best variant (:func:`compare`);
* :mod:`.point`: the sweep entry point (:func:`run_point`).
"""

from .case import Case, case_from_experiment, chakra_source, make_case, run_options
from .compare import (
    Comparison,
    EndpointOutcome,
    Job,
    assemble,
    check_endpoints,
    compare,
    count_runs,
    default_endpoints,
    plan,
    run_jobs,
)
from .point import BEST_PREFIX, run_point
from .single import execute, run, run_case, run_experiment, run_system, variant_case

__all__ = [
    "Case",
    "make_case",
    "case_from_experiment",
    "chakra_source",
    "run_options",
    "Comparison",
    "EndpointOutcome",
    "Job",
    "plan",
    "run_jobs",
    "assemble",
    "compare",
    "count_runs",
    "check_endpoints",
    "default_endpoints",
    "BEST_PREFIX",
    "run_point",
    "execute",
    "run",
    "run_case",
    "run_system",
    "variant_case",
    "run_experiment",
]
