"""Validation against public measurements of real hardware.

The corpus (:mod:`.corpus`, package data ``corpus/<family>.toml``) lists measured figures with
their sources; :func:`validate` simulates each with the model (:mod:`.evaluate`) and reports
the error per case and per family against the family's budget (:mod:`.report`). ``acesim
validate`` prints it. See ``docs/validation.md``.
"""

from .corpus import RUN_KINDS, UNITS, Budget, Case, Corpus, Family, load_corpus
from .evaluate import evaluate_case, simulate_case, system_of, validate
from .held_out import validate_transfer
from .report import CaseResult, FamilyReport, HeldOutValue, Report, TransferReport

__all__ = [
    "RUN_KINDS",
    "UNITS",
    "Budget",
    "Case",
    "CaseResult",
    "Corpus",
    "Family",
    "FamilyReport",
    "HeldOutValue",
    "Report",
    "TransferReport",
    "evaluate_case",
    "load_corpus",
    "simulate_case",
    "system_of",
    "validate",
    "validate_transfer",
]
