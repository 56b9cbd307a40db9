"""What a plan reports: the ranked rows, the substrate comparison, the search's accounting,
as records (JSON, CSV, a DataFrame), text and a Pareto figure (iteration time against memory
per GPU).

Every figure of a row is the simulated run's (``acesim run --json`` on the row's command
line gives the same numbers); the bounds are the search's pruning bounds
(:mod:`acesim.plan.bound`), printed so that a reader sees how far each is from the run.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..results.figure_file import save_figure
from .search import PlanOutcome, PlanRequest, PlanRow

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["PlanResult", "EXPOSED_KINDS"]

#: The communication kinds whose exposed time a row reports.
EXPOSED_KINDS = ("tp", "cp", "ep", "pp", "dp")

GIB = 2**30


def _bound(metrics: dict[str, Any]) -> str:
    """What bound the run most (the largest ``bound_by`` entry)."""
    pairs = [(v, k[len("bound_by.") :]) for k, v in metrics.items() if k.startswith("bound_by.")]
    if not pairs:
        return ""
    return max(pairs, key=lambda p: (p[0], p[1]))[1]


@dataclass
class PlanResult:
    """A finished plan: the request, the search's outcome, and its records."""

    request: PlanRequest
    outcome: PlanOutcome

    @property
    def endpoints(self) -> list[str]:
        return list(self.outcome.rows)

    def top(self, endpoint: str | None = None) -> list[PlanRow]:
        """The ranked rows of ``endpoint`` (default: the first), at most ``top`` of them."""
        kind = endpoint or self.endpoints[0]
        return self.outcome.rows[kind][: self.request.top]

    def command(self, row: PlanRow) -> str:
        """The ``acesim run`` command line that reproduces ``row``."""
        r = self.request
        parts = ["acesim", "run", *shlex.split(r.command)]
        parts += ["-w", r.model.name, "--parallel", row.candidate.text]
        parts += ["--global-batch", str(r.global_batch)]
        parts += ["--micro-batch", str(row.candidate.parallel.micro_batch)]
        parts += ["--seq", str(r.seq), "--precision", r.precision]
        parts += ["--endpoint", row.endpoint]
        if len(self.endpoints) > 1:
            parts.append("--search")
        if r.mode == "composed":
            parts.append("--composed")
        return shlex.join(parts)

    def record(self, rank: int, row: PlanRow) -> dict[str, Any]:
        """One ranked row as a flat record (SI units: s, bytes, fractions)."""
        m = row.metrics
        par = row.candidate.parallel
        out: dict[str, Any] = {
            "rank": rank,
            "endpoint": row.endpoint,
            "variant": m.get("variant", ""),
            "parallel": row.candidate.text,
            "micro_batch": par.micro_batch,
            "parallel_resolved": m.get("parallel_resolved", ""),
            "schedule": m.get("schedule", ""),
            "iteration_time": row.iteration_time,
            "tokens_per_s_per_gpu": m.get("tokens_per_s_per_gpu"),
            "mfu": m.get("mfu"),
            "memory_per_gpu": m.get("memory.total"),
            "hbm_capacity": m.get("hbm_capacity"),
            "bubble_fraction": m.get("bubble_fraction"),
        }
        for kind in EXPOSED_KINDS:
            out[f"exposed_{kind}"] = m.get(f"exposed.{kind}", 0.0)
        out["bound"] = _bound(m)
        out["kernel_bound"] = row.kernel_bound
        out["layer_bound"] = row.layer_bound
        out["gemm_bound"] = row.gemm_bound
        out["network_bound"] = row.network_bound
        out["command"] = self.command(row)
        return out

    def records(self, endpoint: str | None = None) -> list[dict[str, Any]]:
        """The ranked rows of ``endpoint`` (default: the first) as records."""
        return [self.record(i + 1, row) for i, row in enumerate(self.top(endpoint))]

    def substrates(self) -> list[dict[str, Any]]:
        """With several endpoints: each configuration in any endpoint's top rows, its
        iteration time and rank under each endpoint (None: not simulated there, its bound
        kept it out of that endpoint's top)."""
        if len(self.endpoints) < 2:
            return []
        ranks: dict[str, dict[tuple[str, int], tuple[int, float]]] = {}
        for kind, rows in self.outcome.rows.items():
            ranks[kind] = {
                (r.candidate.text, r.candidate.parallel.micro_batch): (i + 1, r.iteration_time)
                for i, r in enumerate(rows)
            }
        keys: list[tuple[str, int]] = []
        for kind in self.endpoints:
            for row in self.top(kind):
                key = (row.candidate.text, row.candidate.parallel.micro_batch)
                if key not in keys:
                    keys.append(key)
        out = []
        for text, micro in keys:
            rec: dict[str, Any] = {"parallel": text, "micro_batch": micro}
            for kind in self.endpoints:
                got = ranks[kind].get((text, micro))
                rec[f"{kind}.iteration_time"] = got[1] if got else None
                rec[f"{kind}.rank"] = got[0] if got else None
            out.append(rec)
        return out

    def budget(self, endpoint: str | None = None) -> dict[str, Any] | None:
        """Where the budget stopped ``endpoint``'s search short of its bounds' end (None: it
        did not): why, the candidates left unexplored, the least of their lower bounds (s),
        how far the best row found can be from the best possible (``gap``: the best time over
        the least time any configuration can take, less 1) and how many of the ranked rows are
        certain (at most that bound: nothing unexplored can come before them)."""
        kind = endpoint or self.endpoints[0]
        o = self.outcome
        if kind not in o.stopped:
            return None
        least = o.unexplored_bound[kind]
        rows = self.top(kind)
        best = rows[0].iteration_time if rows else math.inf
        return {
            "stopped_by": o.stopped[kind],
            "unexplored": o.unexplored[kind],
            "least_bound": least,
            "gap": best / min(best, least) - 1.0 if rows else None,
            "certain_rows": sum(1 for row in rows if row.iteration_time <= least),
        }

    def accounting(self) -> dict[str, Any]:
        """How many candidates each stage of the search removed, and why."""
        o = self.outcome
        return {
            "space": o.space.size,
            "axes": {k: [str(v) for v in vs] for k, vs in o.space.axes.items()},
            "removed_by_rule": dict(sorted(o.space.removed.items(), key=lambda kv: -kv[1])),
            "valid": len(o.space.candidates),
            "refused_building": dict(o.refused_other),
            "built": o.built,
            "memory_refused_by_term": dict(o.memory_refused),
            "memory_refused_unbuilt": o.unbuilt_refused,
            "fit": o.fits,
            "simulated": {k: len(v) for k, v in o.rows.items()},
            "pruned_by_kernel_bound": dict(o.pruned_kernel),
            "pruned_by_network_bound": dict(o.pruned_network),
            "pruned_unbuilt": dict(o.pruned_unbuilt),
            "failed": [{"parallel": p, "endpoint": e, "error": err} for p, e, err in o.failed],
            "budget": {
                "time_limit": self.request.time_limit,
                "max_simulations": self.request.max_simulations,
                "stopped": {kind: self.budget(kind) for kind in o.stopped},
            },
        }

    def to_dict(self) -> dict[str, Any]:
        r = self.request
        return {
            "kind": "plan",
            "model": r.model.name,
            "system": r.system.name,
            "npus": r.system.network.total_npus,
            "global_batch": r.global_batch,
            "seq": r.seq,
            "precision": r.precision,
            "top": r.top,
            "exhaustive": r.exhaustive,
            "mode": r.mode,
            "mode_note": MODE_NOTES[r.mode],
            "endpoints": self.endpoints,
            "bound": BOUND_NOTE,
            "search": self.accounting(),
            "ranked": {kind: self.records(kind) for kind in self.endpoints},
            "substrates": self.substrates(),
        }

    def dataframe(self) -> Any:
        """Every endpoint's ranked rows in one pandas DataFrame."""
        import pandas

        return pandas.DataFrame([rec for kind in self.endpoints for rec in self.records(kind)])

    def pareto(self, endpoint: str | None = None) -> list[PlanRow]:
        """The simulated rows of ``endpoint`` that no other simulated row beats in both
        iteration time and memory per GPU (fastest first)."""
        kind = endpoint or self.endpoints[0]
        front: list[PlanRow] = []
        best_memory = float("inf")
        for row in self.outcome.rows[kind]:  # fastest first
            mem = row.memory["total"]
            if mem < best_memory:
                front.append(row)
                best_memory = mem
        return front

    def figure(self, path: str | Path, endpoint: str | None = None) -> Path:
        """:meth:`draw` written to ``path`` (PNG, SVG or PDF)."""
        import matplotlib.pyplot as plt

        fig = self.draw(endpoint)
        out = Path(path)
        save_figure(fig, out, dpi=150)
        plt.close(fig)
        return out

    def draw(self, endpoint: str | None = None) -> Figure:
        """Iteration time against memory per GPU of every simulated row, the Pareto front
        joined and the top row labelled (on the side of its point with room in the axes)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        kind = endpoint or self.endpoints[0]
        rows = self.outcome.rows[kind]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ax.scatter(
            [r.memory["total"] / GIB for r in rows],
            [r.iteration_time for r in rows],
            s=14,
            color="0.6",
            label=f"simulated ({len(rows)})",
        )
        front = self.pareto(kind)
        ax.plot(
            [r.memory["total"] / GIB for r in front],
            [r.iteration_time for r in front],
            "o-",
            color="C0",
            label="Pareto front",
        )
        ax.axvline(
            self.request.system.npu.hbm_capacity / GIB,
            color="C3",
            ls="--",
            lw=1,
            label="HBM capacity",
        )
        if rows:
            best = rows[0]
            x, y = best.memory["total"] / GIB, best.iteration_time
            # the label on the side of the point with room inside the axes (the fastest row
            # is often the leftmost: a label to its left left the axes)
            low, high = ax.get_xlim()
            right = x < (low + high) / 2
            ax.annotate(
                f"{best.candidate.text}, mbs {best.candidate.parallel.micro_batch}",
                (x, y),
                textcoords="offset points",
                xytext=(6 if right else -6, 8),
                ha="left" if right else "right",
                fontsize=7,
            )
        r = self.request
        ax.set_xlabel("memory per GPU (GiB)")
        ax.set_ylabel("iteration time (s)")
        ax.set_title(
            f"{r.model.name} on {r.system.name} ({r.system.network.total_npus} GPUs), "
            f"GBS {r.global_batch} x {r.seq}, {r.precision}, {kind}",
            fontsize=9,
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        return fig


BOUND_NOTE = (
    "candidates are pruned only when a lower bound on their iteration time (each pipeline "
    "stage's kernels at their time alone, one after another, plus the pipeline fill and "
    "drain, the blocking collectives, FSDP's parameter gathers unit after unit, the first "
    "forward's parameter all-gather and the gradient reduction and optimizer step after the "
    "last op, each at its least; or, before the case is built, its transformer layers' "
    "kernels alone, or dense GEMM FLOPs at the datasheet peak; or, for a candidate simulated "
    "in class mode, its collectives' least bytes through a rank's links at their raw "
    "bandwidth) is at least the K-th best simulated time: no pruned candidate could enter "
    "the top K"
)


#: What each way of simulating the candidates means (PlanRequest.mode), as the output says it.
MODE_NOTES = {
    "composed": (
        "each candidate simulated in mode composed (acesim.training.compose: each distinct "
        "pipeline pass simulated once alone; within 0.03% of class mode on issue 27's "
        "benchmark cases, docs/performance.md); --full simulates each in class mode"
    ),
    "class": "each candidate simulated in class mode (the full simulation)",
}


def rows_text(records: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Table cells of ranked records (for the CLI)."""
    from ..units import format_time

    out = []
    for rec in records:
        exposed = {k: rec[f"exposed_{k}"] for k in EXPOSED_KINDS if rec[f"exposed_{k}"]}
        worst = max(exposed, key=lambda k: exposed[k]) if exposed else ""
        out.append(
            [
                str(rec["rank"]),
                rec["parallel"],
                str(rec["micro_batch"]),
                format_time(rec["iteration_time"]),
                f"{rec['tokens_per_s_per_gpu']:,.0f}",
                f"{100 * rec['mfu']:.1f}%",
                f"{rec['memory_per_gpu'] / GIB:.1f} GiB",
                f"{100 * rec['bubble_fraction']:.1f}%",
                f"{worst.upper()} {format_time(exposed[worst])}" if worst else "-",
                rec["bound"],
            ]
        )
    return out
