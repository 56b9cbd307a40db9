"""The one run path, for every run kind (collective, training graph, LLM): parse -> case ->
plan (endpoint kinds and their searched variants) -> strategy -> execute -> result.

* :mod:`.kinds`: the registry of run kinds (:data:`RUN_KINDS`), each a case type, its
  ``execute`` and its sweep points;
* :mod:`.case`, :mod:`.training`: training graphs (a system, a workload and run options,
  resolved once; unrolled, placed and run);
* :mod:`.llm`: LLM training (a model, a Megatron parallel configuration and a system);
* :mod:`.collective`: one collective (:func:`simulate_collective`);
* :mod:`.single`: one run of any case (:func:`run`, :func:`run_case`; ``search`` over an
  endpoint kind's variants);
* :mod:`.compare`: endpoint kinds side by side, each in its best variant (:func:`compare`);
* :mod:`.point`: the sweep entry point (:func:`run_point`).
"""

from .case import Case, case_from_experiment, chakra_source, make_case, run_options
from .collective import CollectiveCase, make_collective_case, simulate_collective
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
from .kinds import RUN_KINDS, RunKind, kind_of, make_run_case
from .llm import LlmCase, make_llm, make_llm_case, run_llm
from .point import BEST_PREFIX, run_point
from .single import execute, run, run_case, run_experiment, run_system, variant_case

__all__ = [
    "RUN_KINDS",
    "RunKind",
    "kind_of",
    "make_run_case",
    "Case",
    "make_case",
    "case_from_experiment",
    "chakra_source",
    "run_options",
    "CollectiveCase",
    "make_collective_case",
    "simulate_collective",
    "LlmCase",
    "make_llm",
    "make_llm_case",
    "run_llm",
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
