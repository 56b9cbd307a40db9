"""The search space of a training plan: every parallel configuration of a model on a cluster,
and the rules that remove candidates.

Axes (:data:`AXES`, one registry; ``--space NAME=v1,v2`` replaces an axis's values):

* ``tp``: tensor parallelism; default the powers of two up to the NVLink domain (the first
  network dimension: Megatron keeps TP inside it, and a TP group across nodes is a
  TopologyError or far slower; widen it with ``--space tp=...``).
* ``pp``: pipeline stages; default every power of two up to the GPUs.
* ``vpp``: model chunks per rank (interleaving); default 1 to 8.
* ``cp``: context parallelism; default 1, 2, 4, 8.
* ``ep``: expert parallelism; default 1 for dense models, the powers of two up to the
  experts for MoE models.
* ``zero``: 1 (distributed optimizer, ZeRO-1) and 3 (FSDP); 0 (replicated optimizer) on
  request (it holds the most memory and moves the same bytes as 1).
* ``micro_batch``: 1, 2, 4, 8.
* ``recompute``: none, selective, full.
* ``tp_overlap``: 0 and 1 (TP communication overlap; needs tp > 1).
* ``schedule``: ``default`` (Megatron's: interleaved with vpp > 1, else 1F1B); any name of
  :data:`acesim.training.schedules.SCHEDULES` on request.

``dp`` is what the GPUs leave. A candidate is the product of one value per axis; the rules are
the model's own (:class:`~acesim.workload.llm.parallel.ParallelConfig`'s checks,
``check_model``, ``data_parallel``, ``micro_batches`` and the schedule's ``check``): a
candidate they refuse is counted under its rule (the refusal's field and rule, numbers
replaced by ``N`` so that one rule counts once), never dropped silently.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import ConfigError, TopologyError
from ..training.schedules import SCHEDULES, default_schedule
from ..workload.llm.models import TransformerConfig
from ..workload.llm.parallel import ParallelConfig

__all__ = ["AXES", "Axis", "Space", "Candidate", "enumerate_space", "parse_space"]

#: The schedule axis value for Megatron's default schedule.
DEFAULT_SCHEDULE = "default"


@dataclass(frozen=True)
class Cluster:
    """What the default axes depend on: the GPUs and the NVLink domain (GPUs)."""

    gpus: int
    domain: int


def _powers(limit: int) -> list[int]:
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


@dataclass(frozen=True)
class Axis:
    """One axis: its name, its default values for a model and cluster, how a text value
    parses, and one line of help."""

    name: str
    default: Callable[[TransformerConfig, Cluster], list[object]]
    parse: Callable[[str], object]
    help: str


def _int(text: str) -> int:
    if not text.isdigit() or int(text) < 0:
        raise ValueError("a whole number")
    return int(text)


def _flag(text: str) -> int:
    if text not in ("0", "1"):
        raise ValueError("0 or 1")
    return int(text)


def _recompute(text: str) -> str:
    if text not in ("none", "selective", "full"):
        raise ValueError("none, selective or full")
    return text


def _schedule(text: str) -> str:
    if text != DEFAULT_SCHEDULE and text not in SCHEDULES.names():
        raise ValueError(f"{DEFAULT_SCHEDULE} or one of {', '.join(SCHEDULES.names())}")
    return text


AXES: tuple[Axis, ...] = (
    Axis("tp", lambda m, c: list(_powers(c.domain)), _int, "tensor parallelism"),
    Axis("pp", lambda m, c: list(_powers(c.gpus)), _int, "pipeline stages"),
    Axis("vpp", lambda m, c: list(range(1, 9)), _int, "model chunks per rank"),
    Axis("cp", lambda m, c: [1, 2, 4, 8], _int, "context parallelism"),
    Axis(
        "ep",
        lambda m, c: list(_powers(m.experts)) if m.experts else [1],
        _int,
        "expert parallelism",
    ),
    Axis("zero", lambda m, c: [1, 3], _int, "0 replicated, 1 distributed optimizer, 3 FSDP"),
    Axis("micro_batch", lambda m, c: [1, 2, 4, 8], _int, "sequences per micro-batch"),
    Axis(
        "recompute",
        lambda m, c: ["none", "selective", "full"],
        _recompute,
        "activation recomputation",
    ),
    Axis("tp_overlap", lambda m, c: [0, 1], _flag, "TP communication overlap"),
    Axis("schedule", lambda m, c: [DEFAULT_SCHEDULE], _schedule, "pipeline schedule"),
)
_BY_NAME = {a.name: a for a in AXES}


def parse_space(items: Sequence[str], field: str = "--space") -> dict[str, list[object]]:
    """``["tp=2,4", "recompute=full"]`` -> {axis: values}; ConfigError naming ``field`` for
    an unknown axis, a value the axis does not take, or an axis given twice."""
    out: dict[str, list[object]] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or name not in _BY_NAME:
            raise ConfigError(
                field, f"expected AXIS=v1,v2 with AXIS one of {', '.join(_BY_NAME)}", item
            )
        if name in out:
            raise ConfigError(field, f"axis {name} is given twice", item)
        values: list[object] = []
        for text in (t.strip().lower() for t in raw.split(",")):
            try:
                value = _BY_NAME[name].parse(text)
            except ValueError as exc:
                raise ConfigError(f"{field} {name}", f"each value must be {exc}", text) from None
            if value not in values:
                values.append(value)
        if not values:
            raise ConfigError(f"{field} {name}", "needs at least one value", item)
        out[name] = values
    return out


@dataclass(frozen=True)
class Candidate:
    """One valid configuration: its parallel configuration (dp resolved) and the
    ``--parallel`` text that ``acesim run`` takes for it."""

    parallel: ParallelConfig
    text: str


@dataclass
class Space:
    """The enumeration's outcome: the valid candidates, in axis order, and the count of
    candidates each rule removed."""

    axes: dict[str, list[object]]
    candidates: list[Candidate] = field(default_factory=list)
    removed: Counter[str] = field(default_factory=Counter)

    @property
    def size(self) -> int:
        """Candidates before the rules (the product of the axes)."""
        n = 1
        for values in self.axes.values():
            n *= len(values)
        return n


def rule_name(err: ConfigError | TopologyError) -> str:
    """A refusal as the rule it broke, its numbers replaced by ``N`` (one rule, one count)."""
    if isinstance(err, ConfigError):
        text = f"{err.field}: {err.rule}"
    else:
        text = str(err)
    return re.sub(r"\b\d+(\.\d+)?\b", "N", text)  # numbers, not names (1f1b, zb-h1)


def _text(p: ParallelConfig, schedule: object) -> str:
    """The ``--parallel`` text of a candidate: tp and pp, then only what differs from
    ``acesim run``'s defaults (vpp, cp, ep 1; zero 1; no recomputation, no TP overlap;
    Megatron's schedule)."""
    parts = [f"tp={p.tp}", f"pp={p.pp}"]
    parts += [f"{name}={getattr(p, name)}" for name in ("vpp", "cp", "ep") if getattr(p, name) > 1]
    if p.zero != 1:
        parts.append(f"zero={p.zero}")
    if p.recompute != "none":
        parts.append(f"recompute={p.recompute}")
    if p.tp_overlap:
        parts.append("tp_overlap=1")
    if schedule != DEFAULT_SCHEDULE:
        parts.append(f"schedule={schedule}")
    return ",".join(parts)


def _check(
    values: Mapping[str, object],
    model: TransformerConfig,
    gpus: int,
    *,
    global_batch: int,
    seq: int,
    orders: dict[tuple[str, int, int, int], ConfigError | TopologyError | None],
) -> Candidate:
    """The candidate of one value per axis, or the ConfigError of the first rule it breaks
    (the rules :func:`acesim.runs.llm.make_llm_case` applies before building the work);
    ``orders``: each (schedule, pp, vpp, micro-batches) its order's rules already judged."""
    schedule = values["schedule"]
    par = ParallelConfig(
        tp=int(values["tp"]),  # type: ignore[call-overload]
        pp=int(values["pp"]),  # type: ignore[call-overload]
        vpp=int(values["vpp"]),  # type: ignore[call-overload]
        cp=int(values["cp"]),  # type: ignore[call-overload]
        ep=int(values["ep"]),  # type: ignore[call-overload]
        zero=int(values["zero"]),  # type: ignore[call-overload]
        micro_batch=int(values["micro_batch"]),  # type: ignore[call-overload]
        recompute=values["recompute"],  # type: ignore[arg-type]
        tp_overlap=bool(values["tp_overlap"]),
        schedule=None if schedule == DEFAULT_SCHEDULE else str(schedule),
        global_batch=global_batch,
        seq=seq,
    )
    par.check_model(model)
    dp = par.data_parallel(gpus)
    micro = par.micro_batches(dp)
    name = par.schedule or default_schedule(par.vpp)
    key = (name, par.pp, par.vpp, micro)
    if key not in orders:  # the order's rules depend on these alone: checked once
        try:
            order = SCHEDULES.get(name)
            order.check(par.pp, par.vpp, micro)
            order.stage_ops(par.pp, 0, micro, par.vpp * order.directions)  # its own rules
            orders[key] = None
        except (ConfigError, TopologyError) as err:
            orders[key] = err
    refusal = orders[key]
    if refusal is not None:
        raise refusal
    return Candidate(par, _text(par, schedule))


def enumerate_space(
    model: TransformerConfig,
    cluster: Cluster,
    *,
    global_batch: int,
    seq: int,
    space: Mapping[str, list[object]] | None = None,
) -> Space:
    """Every candidate of the axes (defaults for ``model`` on ``cluster``, replaced by
    ``space``'s), valid ones kept in axis order, the others counted by rule."""
    axes = {a.name: list((space or {}).get(a.name) or a.default(model, cluster)) for a in AXES}
    out = Space(axes)
    names = list(axes)
    orders: dict[tuple[str, int, int, int], ConfigError | TopologyError | None] = {}
    rules: dict[str, str] = {}
    for combo in itertools.product(*axes.values()):
        values = dict(zip(names, combo, strict=True))
        try:
            out.candidates.append(
                _check(
                    values, model, cluster.gpus, global_batch=global_batch, seq=seq, orders=orders
                )
            )
        except (ConfigError, TopologyError) as err:
            text = str(err)
            rule = rules.get(text)
            if rule is None:
                rule = rules[text] = rule_name(err)
            out.removed[rule] += 1
    return out
