"""Float sums done as a run of sequential additions would do them (defined in
:mod:`acesim.sums`, where the engine's integrals and the unions of intervals use them too)."""

from __future__ import annotations

from ..sums import add_repeatedly

__all__ = ["add_repeatedly"]
