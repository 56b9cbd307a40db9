"""``acesim.simulate.simulate_collective``: one collective on a system (the collective run
kind, :mod:`acesim.runs.collective`)."""

from .runs.collective import simulate_collective

__all__ = ["simulate_collective"]
