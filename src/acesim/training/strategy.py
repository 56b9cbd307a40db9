"""The execution strategy of a run, decided once before it runs, with the reason.

One rule for every run kind (collective, training graph, LLM; :mod:`acesim.runs.kinds`):

* asked for ``exact``: every NPU simulated;
* asked for ``composed`` (LLM runs: a graph of pipeline stages): class mode with the iteration
  composed from passes simulated alone (:mod:`.compose`), where class mode would run, or class
  mode itself where the run kind says why its passes cannot be composed (``uncomposable``:
  FSDP); a graph without pipeline stages is refused (it has no passes to compose);
* otherwise the fewest simulated NPUs that stand for every rank: one per class of the
  graph's classes (class mode) or one (symmetric mode), unless something makes ranks
  differ, which one representative cannot stand for; then exact mode, and the strategy says
  why (the result's ``mode_note``; the commands print it on stderr). Nothing is refused for
  being asked in the other mode. What makes ranks differ:

  - variation: stragglers, a compute spread, link changes, NPU types, a placement (a
    straggler and a compute spread slow compute kernels only: a run without any, a
    collective alone, is the same on every NPU with them, so they are no reason there and
    the note says so);
  - the graph: ranks with different graphs, point-to-point messages (without classes),
    pipeline messages that a class's members would route differently (class mode), or a
    graph the run kind cannot reduce (``problem``: an LLM rank order whose stages are not
    blocks of ranks);
  - collectives one representative cannot run: rooted ones (broadcast, reduce), a routed
    shift over several dimensions;
  - the network: an oversubscribed leaf/spine fabric (messages crossing the spine load it
    unevenly).

Within exact mode (:class:`~acesim.hardware.strategy.Strategy`): ``lockstep`` unless the
backend is off, a trace records every message, the endpoint charges the NPUs
(:func:`acesim.network.vectorized.endpoint_problem`) or point-to-point messages share the
links (``events`` says which); ``replicate`` where, besides, one graph stands for every rank,
nothing varies and the graph holds only compute and collective nodes. Which collectives then
ran on the event path, and why, is the backend's to say during the run
(:attr:`~acesim.training.executor.Execution.event_reasons`); :func:`mode_note` joins both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..config.system import SystemConfig
from ..config.variation import Variation
from ..errors import ConfigError
from ..hardware.endpoints import ENDPOINT_KINDS
from ..hardware.strategy import Strategy
from ..hardware.variation import check_stragglers
from ..network import vectorized
from ..network.group import resolve
from ..network.ops import COLLECTIVE_OPS
from ..network.topology import Topology
from ..workload.graph import Graph
from .executor import Execution

__all__ = ["decide", "mode_note", "variation_reasons"]

#: What each variation field makes differ, for the note.
_VARIED = {
    "stragglers": "stragglers",
    "compute_spread": "a compute spread",
    "links": "link changes",
    "npu_types": "NPU types",
}


#: The variation fields that act on compute kernels only (the NPU's kernel plans:
#: :meth:`acesim.hardware.npu.NPU.set_slowdown`).
_COMPUTE_ONLY = ("stragglers", "compute_spread")


def variation_reasons(variation: Variation | None, placed: bool = False) -> list[str]:
    """What in ``variation`` (and a placement) makes ranks differ, as the note names it."""
    out = [text for name, text in _VARIED.items() if variation and getattr(variation, name)]
    if placed:
        out.append("a placement")
    return out


def _graph_reasons(graph: Graph, topology: Topology) -> list[str]:
    """What in ``graph`` one representative per class cannot stand for."""
    out = []
    if graph.classes is None and not graph.symmetric:
        out.append("ranks have different graphs")
    p2p = {(c, n.peer) for c, nodes in enumerate(graph.ranks) for n in nodes if n.kind == "send"}
    if p2p and graph.classes is None:
        out.append("point-to-point sends and receives")
    elif p2p and graph.classes is not None:
        pairs = {(c, peer) for c, peer in p2p if peer is not None}
        problem = graph.classes.route_problem(topology, pairs)
        if problem is not None:
            out.append(f"pipeline messages are not symmetric: {problem}")
    rooted: set[str] = set()
    for nodes in graph.ranks[:1] if graph.symmetric else graph.ranks:
        for n in nodes:
            if n.kind != "collective" or n.op is None or n.op in rooted:
                continue
            spec = COLLECTIVE_OPS.get(n.op)
            if not spec.symmetric:
                rooted.add(n.op)
            elif spec.routed_shift:
                axes = resolve(topology, n.group if n.group is not None else n.dims)
                if sum(1 for a in axes if a.size > 1) > 1:
                    rooted.add(n.op)
    out += [f"{op} (its members do different work)" for op in sorted(rooted)]
    return out


def _fast_paths(
    system: SystemConfig, graph: Graph, variation: Variation | None, trace: bool
) -> tuple[bool, bool, str]:
    """Exact mode: (lockstep, replicate, why collectives run on the event path)."""
    build = ENDPOINT_KINDS.get(system.endpoint.kind).build
    events = None
    if not vectorized.ENABLED:
        events = "the lockstep backend is off"
    elif trace:
        events = "a trace records every message"
    elif isinstance(build, type):
        events = vectorized.endpoint_problem(build)
    kinds = {n.kind for nodes in graph.ranks for n in nodes}
    if events is None and "send" in kinds:
        events = "point-to-point messages share the links"
    if events is None and "host_copy" in kinds:
        events = "host-device copies share HBM and the copy engines"
    lockstep = events is None
    replicate = (
        lockstep
        and not variation
        and len(graph.ranks) == 1
        and all(n.kind in ("compute", "collective") for n in graph.ranks[0])
    )
    return lockstep, replicate, events or ""


def decide(
    system: SystemConfig,
    graphs: Callable[[bool], Graph],
    *,
    requested: str = "symmetric",
    variation: Variation | None = None,
    placed: bool = False,
    trace: bool = False,
    problem: str | None = None,
    uncomposable: str | None = None,
    computes: bool = True,
) -> tuple[Strategy, Graph]:
    """The strategy of a run (module docstring) and the graph it runs.

    Args:
        system: the run's system.
        graphs: ``graphs(reduced)``: the run kind's graph, with one node list per class
            (``reduced``: the graph class or symmetric mode runs; the graph's ``classes`` say
            which; asked for ``composed``, the composed graph, or class mode's own where
            ``uncomposable``) or per rank.
        requested: the mode asked for: ``exact``, or ``symmetric``/``class`` (the fewest
            simulated NPUs the run kind's graph allows).
        variation: what makes ranks differ (stragglers, spread, links, NPU types).
        placed: a placement moves ranks (:mod:`acesim.workload.placement`).
        trace: a trace records every message (exact mode then runs every message).
        problem: why the run kind has no reduced graph (None: it has one).
        uncomposable: why a ``composed`` run's iteration cannot be composed (class mode
            instead, the strategy's note says why; None: it can).
        computes: the run has compute kernels (False: a collective alone, where stragglers
            and a compute spread change nothing and are dropped, the note saying so).
    """
    unused = ""
    topology = Topology(system.network, system.collective)
    if not computes and variation and any(getattr(variation, n) for n in _COMPUTE_ONLY):
        check_stragglers(variation.stragglers, topology.npus)  # dropped, but still checked
        variation = replace(variation, stragglers=(), compute_spread=None)
        unused = (
            "stragglers and a compute spread slow compute kernels only, and this run has "
            "none: every NPU runs alike with them"
        )
    reasons = variation_reasons(variation, placed)
    if problem is not None:
        reasons.append(problem)
    if requested != "exact" and not reasons:
        if any(d.spine for d in topology.dimensions):
            reasons.append("an oversubscribed leaf/spine fabric loads the spine unevenly")
        reduced = graphs(True)
        if requested == "composed" and reduced.classes is None:
            raise ConfigError(
                "run.mode", "composed composes pipeline passes: LLM runs only", requested
            )
        if requested == "composed" and trace and uncomposable is None:
            raise ConfigError(
                "run.mode", "composed runs its passes as timers: it has no per-kernel trace "
                "(trace a class-mode run)", requested,
            )  # fmt: skip
        reasons += _graph_reasons(reduced, topology)
        if not reasons:
            if reduced.classes is not None:
                asked = requested == "composed"
                composed = asked and uncomposable is None
                why = f"class mode, not composed: {uncomposable}" if asked and uncomposable else ""
                why = "; ".join(t for t in (why, unused) if t)
                chosen = Strategy.of_classes(reduced.classes, why, composed=composed)
                return chosen, reduced
            return Strategy(note=unused), reduced
    note = unused
    if requested != "exact":
        note = "; ".join(
            t for t in ("exact mode (every NPU simulated): " + "; ".join(reasons), unused) if t
        )
    graph = graphs(False)
    lockstep, replicate, events = _fast_paths(system, graph, variation, trace)
    strategy = Strategy("exact", None, variation or None, lockstep, replicate, note, events)
    return strategy, graph


def mode_note(strategy: Strategy, execution: Execution | None = None) -> str:
    """What a result says of its strategy: why the mode (when not the one asked for), how a
    composed iteration was composed, in exact mode which collectives ran on the event path
    and why."""
    parts = [strategy.note] if strategy.note else []
    if execution is not None and execution.composed is not None:
        parts.append(execution.composed.note())
    if execution is not None and execution.event_reasons:
        total = len(execution.collectives)
        events = sum(execution.event_reasons.values())
        reasons = sorted(execution.event_reasons.items())
        why = "; ".join(f"{n}: {reason}" for reason, n in reasons) if len(reasons) > 1 else ""
        why = why or reasons[0][0]
        parts.append(f"{events} of {total} collectives on the event path ({why})")
    return "; ".join(parts)
