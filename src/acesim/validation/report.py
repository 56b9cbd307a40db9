"""What a validation run found: per case the measured and simulated figures and the error, per
family the error of its test rows against the family's budget.

The error of a case is ``simulated / measured - 1`` (+0.05: acesim is 5% high). A family's
statistic is taken over its *test* rows that were simulated (``status == "ok"`` and not fit):
fit rows were used to choose a parameter and prove nothing; unsupported rows, rows that could
not be evaluated (``error``) and rows left out of a quick run (``skipped``) have no error. A
family without any simulated test row has nothing to judge (``within_budget`` is None); only a
family over its budget fails a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .corpus import Band, Budget, Case, Family

__all__ = ["CaseResult", "FamilyReport", "HeldOutValue", "Report", "Status", "TransferReport"]

Status = Literal["ok", "unsupported", "error", "skipped"]


@dataclass(frozen=True)
class CaseResult:
    """One case evaluated: ``simulated`` in the case's unit (None unless ``ok``); ``note`` is
    what bound the simulated figure, or why there is none."""

    case: Case
    status: Status
    simulated: float | None = None
    note: str = ""
    fitted: bool | None = None

    @property
    def is_fit(self) -> bool:
        """A parameter was fitted on this row in this run (``fitted``; None: the row's ``fit``;
        False in a leave-one-system-out run, where the row's system's fits are withheld)."""
        return self.case.fit if self.fitted is None else self.fitted

    @property
    def error(self) -> float | None:
        if self.simulated is None:
            return None
        return self.simulated / self.case.measured - 1.0

    @property
    def is_test(self) -> bool:
        """A simulated row that was not used for a fit: it counts against the budget."""
        return self.status == "ok" and not self.is_fit

    def to_dict(self) -> dict[str, Any]:
        c = self.case
        return {
            "id": c.id,
            "system": c.system,
            "kind": c.kind,
            "run": c.run.model_dump(mode="json") if c.run is not None else None,
            "measured": c.measured,
            "unit": c.unit,
            "simulated": self.simulated,
            "error": self.error,
            "fit": self.is_fit,
            "fits": list(c.fits),
            "quick": c.quick,
            "error_before_fit": c.error_before_fit,
            "before_fit": c.before_fit,
            "status": self.status,
            "note": self.note,
            "reason": c.reason,
            "source": c.source,
            "setup": c.setup,
        }


@dataclass(frozen=True)
class FamilyReport:
    """One family's cases and how its test rows compare with its budget; ``held_out``: every
    row simulated with its system's own fits withheld (``acesim validate --transfer``), judged
    against the family's transfer target instead, which never fails a run."""

    family: Family
    results: tuple[CaseResult, ...]
    held_out: bool = False

    @property
    def name(self) -> str:
        return self.family.name

    @property
    def budget(self) -> Budget | None:
        """The budget the rows are judged against (None: a held-out run of a family without a
        transfer target: reported, not judged)."""
        return self.family.transfer_target if self.held_out else self.family.budget

    @property
    def bands(self) -> list[Band]:
        return self.budget.bands if self.budget is not None else []

    def _count(self, status: Status) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def test_errors(self) -> list[float]:
        """|error| of the simulated test rows."""
        return [abs(r.error) for r in self.results if r.is_test and r.error is not None]

    @property
    def mean_error(self) -> float | None:
        errors = self.test_errors
        return sum(errors) / len(errors) if errors else None

    @property
    def max_error(self) -> float | None:
        errors = self.test_errors
        return max(errors) if errors else None

    @property
    def judged(self) -> float | None:
        """The budget's statistic over the test rows (None without any; the mean without a
        budget)."""
        if self.budget is not None and self.budget.statistic == "max":
            return self.max_error
        return self.mean_error

    def band_errors(self, band: Band) -> list[float]:
        """|error| of the simulated test rows in ``band``."""
        return [
            abs(r.error)
            for r in self.results
            if r.is_test and r.error is not None and band.holds(r.case)
        ]

    def band_judged(self, band: Band) -> float | None:
        """The band's statistic over its test rows (None without any)."""
        errors = self.band_errors(band)
        if not errors:
            return None
        return sum(errors) / len(errors) if band.statistic == "mean" else max(errors)

    @property
    def within_budget(self) -> bool | None:
        """Every statistic of the budget (overall and per band) within its limit; None
        without any simulated test row."""
        value = self.judged
        if value is None or self.budget is None:
            return None
        bands = [(self.band_judged(b), b.limit) for b in self.bands]
        return value <= self.budget.limit and all(v is None or v <= limit for v, limit in bands)

    @property
    def fails_run(self) -> bool:
        """Over budget in a gating family (a held-out run never fails)."""
        return self.family.gating and not self.held_out and self.within_budget is False

    @property
    def counts(self) -> dict[str, int]:
        return {
            "test": len(self.test_errors),
            "fit": sum(1 for r in self.results if r.is_fit),
            "unsupported": self._count("unsupported"),
            "error": self._count("error"),
            "skipped": self._count("skipped"),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.name,
            "title": self.family.title,
            "budget": self.budget.model_dump(mode="json") if self.budget is not None else None,
            "held_out": self.held_out,
            "summary": {
                "mean_abs_error": self.mean_error,
                "max_abs_error": self.max_error,
                "within_budget": self.within_budget,
                "gating": self.family.gating,
                "gating_note": self.family.gating_note,
                "bands": [
                    {
                        **b.model_dump(mode="json"),
                        "label": b.label,
                        "judged": self.band_judged(b),
                        "rows": len(self.band_errors(b)),
                    }
                    for b in self.bands
                ],
                "rows": self.counts,
            },
            "cases": [r.to_dict() for r in self.results],
        }


@dataclass(frozen=True)
class Report:
    """Every family evaluated; ``quick`` when only the quick rows were simulated."""

    families: tuple[FamilyReport, ...]
    quick: bool = False
    corpus: str = ""

    @property
    def within_budget(self) -> bool:
        """No gating family over its budget (families with nothing to judge pass; a family
        that does not gate is reported, not judged here)."""
        return not any(f.fails_run for f in self.families)

    def family(self, name: str) -> FamilyReport:
        for f in self.families:
            if f.name == name:
                return f
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "acesim.validation/1",
            "corpus": self.corpus,
            "quick": self.quick,
            "within_budget": self.within_budget,
            "families": [f.to_dict() for f in self.families],
        }


@dataclass(frozen=True)
class HeldOutValue:
    """One fitted or transferred parameter of a held-out system: its value (None: the
    field's unset value) and how it got it (``fit on <preset>'s rows``, ``transfer <rule>
    from <presets>``)."""

    system: str
    preset: str
    parameter: str
    value: float | None
    how: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class TransferReport:
    """``acesim validate --transfer``: the in-sample run and the held-out run of the same
    rows (every row with its system's own fits withheld), and the held-out systems'
    parameters."""

    in_sample: Report
    held_out: Report
    values: tuple[HeldOutValue, ...]

    @property
    def within_budget(self) -> bool:
        """The in-sample run's verdict (the held-out run reports its targets, never fails)."""
        return self.in_sample.within_budget

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "acesim.validation.transfer/1",
            "in_sample": self.in_sample.to_dict(),
            "held_out": self.held_out.to_dict(),
            "held_out_values": [v.to_dict() for v in self.values],
        }
