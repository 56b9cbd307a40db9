"""How a rank's messages share HBM with the compute kernel.

Under dominant-resource fairness (the endpoint's :meth:`~acesim.network.endpoint.Endpoint.
hbm_parallelism` is None) each message is its own party with the endpoint's
``message_weight``. Under memory-level parallelism the messages of a rank are one party: the
collective kernel (or engine) whose memory-level parallelism, in compute units' worth of
requests in flight, is the endpoint's; its weight on the rank's HBM is split evenly over the
messages in flight and re-split whenever one starts or ends.
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

    def start(
        self,
        rank: int,
        nbytes: float,
        demand: dict[Resource, float],
        on_done: Callable[[Activity], Any],
        *,
        tag: Any,
        track: str | None,
    ) -> Activity:
        """Start a message of ``nbytes`` bytes at ``rank``; ``on_done`` as engine.start's."""
        share = self.endpoint.hbm_parallelism(rank)
        if share is None or demand.get(share[0], 0.0) <= 0:
            return self.engine.start(
                nbytes,
                demand,
                on_done,
                weight=self.endpoint.message_weight,
                tag=tag,
                track=track,
            )
        basis, units = share
        inflight = self._inflight[rank]

        def done(act: Activity) -> None:
            inflight.pop(act, None)
            self._reweight(inflight, units)
            on_done(act)

        act = self.engine.start(
            nbytes,
            demand,
            done,
            weight=units / (len(inflight) + 1),
            tag=tag,
            track=track,
            basis=basis,
        )
        inflight[act] = None
        self._reweight(inflight, units)
        return act

    def _reweight(self, inflight: dict[Activity, None], units: float) -> None:
        if not inflight:
            return
        weight = units / len(inflight)
        for act in inflight:
            self.engine.set_weight(act, weight)
