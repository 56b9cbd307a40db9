"""``acesim plan``: the best ways to train a model on a cluster, ranked (docs/plan.md).

:mod:`.space` enumerates the candidates and the rules that remove them, :mod:`.bound` the
lower bounds that prune them, :mod:`.search` the branch and bound that simulates the rest,
:mod:`.report` the records, tables and figure, :mod:`.run` the one entry point
(:func:`plan`).
"""

from .report import PlanResult
from .run import plan

__all__ = ["plan", "PlanResult"]
