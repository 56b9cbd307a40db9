"""How a rank's messages share HBM with the compute kernel.

Under dominant-resource fairness (the endpoint's :meth:`~acesim.network.endpoint.Endpoint.
hbm_parallelism` is None) each message is its own party with the endpoint's
``message_weight``. Under memory-level parallelism the messages of a rank are one party: the
collective kernel (or engine) whose memory-level parallelism, in compute units' worth of
requests in flight, is the endpoint's; its weight on the rank's HBM is split evenly over the
messages in flight and re-split whenever one starts or ends: once per instant, just before
the rates are computed (a step of ``k`` messages that start together and end together re-splits
twice, not ``2k`` times over ``k`` messages).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..engine import Activity, Engine, Resource
from .endpoint import Endpoint

__all__ = ["MessageShares"]


class MessageShares:
    """Starts message activities with the weights their endpoint's HBM sharing gives."""

    def __init__(self, engine: Engine, endpoint: Endpoint, ranks: int):
        self.engine = engine
        self.endpoint = endpoint
        self._inflight: list[dict[Activity, None]] = [{} for _ in range(ranks)]
        #: ranks whose messages' weights are to be re-split before the next reallocation
        self._stale: dict[int, float] = {}

    def start(
        self,
        rank: int,
        nbytes: float,
        demand: dict[Resource, float],
        on_done: Callable[[Activity], Any],
        *,
        tag: Any,
        track: str | None,
        shared: bool = False,
    ) -> Activity:
        """Start a message of ``nbytes`` bytes at ``rank``; ``on_done`` and ``shared`` as
        engine.start's."""
        weight, basis = self.solo(rank, demand)
        if basis is None:
            return self.engine.start(
                nbytes, demand, on_done, weight=weight, tag=tag, track=track, shared=shared
            )
        inflight = self._inflight[rank]
        act = self.engine.start(
            nbytes,
            demand,
            self._in_flight(rank, weight, on_done),
            weight=weight / (len(inflight) + 1),  # the rank's weight split over its messages
            tag=tag,
            track=track,
            basis=basis,
            shared=shared,
        )
        inflight[act] = None
        self._mark(rank, weight)
        return act

    def solo(self, rank: int, demand: dict[Resource, float]) -> tuple[float, Resource | None]:
        """The weight and weight basis :meth:`start` gives a message of ``demand`` at ``rank``
        when it is the rank's only message in flight."""
        share = self.endpoint.hbm_parallelism(rank)
        if share is None or demand.get(share[0], 0.0) <= 0:
            return self.endpoint.message_weight, None
        return share[1], share[0]

    def resume(
        self,
        rank: int,
        nbytes: float,
        demand: dict[Resource, float],
        on_done: Callable[[Activity], Any],
        *,
        started: float,
        rate: float,
        bound: Any,
        tag: Any,
        track: str | None,
    ) -> Activity:
        """The message :meth:`start` began at ``started`` (s) as the rank's only one in flight,
        alone on its resources at ``rate`` (B/s) since, as it stands now
        (:meth:`~acesim.engine.Engine.resume`)."""
        weight, basis = self.solo(rank, demand)
        shared = basis is not None
        act = self.engine.resume(
            nbytes,
            demand,
            self._in_flight(rank, weight, on_done) if shared else on_done,
            started=started,
            rate=rate,
            bound=bound,
            weight=weight,
            basis=basis,
            tag=tag,
            track=track,
        )
        if shared:
            self._inflight[rank][act] = None
        return act

    def _in_flight(
        self, rank: int, units: float, on_done: Callable[[Activity], Any]
    ) -> Callable[[Activity], None]:
        """``on_done`` of a message counted in ``rank``'s weight split: it leaves the count
        (the split redone before the next reallocation) first."""
        inflight = self._inflight[rank]

        def done(act: Activity) -> None:
            inflight.pop(act, None)
            self._mark(rank, units)
            on_done(act)

        return done

    def _mark(self, rank: int, units: float) -> None:
        """Re-split ``rank``'s weight over its messages before the next reallocation."""
        if not self._stale:
            self.engine.before_reallocation(self._reweight)
        self._stale[rank] = units

    def _reweight(self) -> None:
        stale = self._stale
        self._stale = {}
        for rank, units in stale.items():
            inflight = self._inflight[rank]
            if not inflight:
                continue
            weight = units / len(inflight)
            for act in inflight:
                self.engine.set_weight(act, weight)
