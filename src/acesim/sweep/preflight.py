"""What ``acesim sweep --dry-run`` checks beyond a point's validation: the steps a point takes
before its simulation starts, without simulating.

A validated point can still fail at once when it runs: its workload cannot be loaded or
unrolled for its system (a Chakra trace for another NPU count, a measurement the iterations
cannot give), its platform cannot be built (an endpoint kind the system cannot run), or its
collective cannot be planned (a forced algorithm that cannot run the operation on the group).
:func:`preflight` takes exactly those steps and returns the error a run would stop with, so a
dry run marks such points invalid instead of valid.
"""

from __future__ import annotations

from typing import Any

from ..errors import AcesimError

__all__ = ["preflight"]


def preflight(config: dict[str, Any]) -> str | None:
    """The error the point of normalised ``config`` would stop with before simulating (None:
    it would start)."""
    from ..config.presets import system_from_dict
    from ..hardware.platform import Platform
    from ..hardware.strategy import Strategy

    try:
        if config["kind"] == "collective":
            system = system_from_dict(config["system"])
            platform = Platform(system, exact=bool(config.get("exact", False)))
            dims = config.get("dims")
            platform.collectives.choose(
                config["op"], config["size"], dims=tuple(dims) if dims else None
            )
        elif config["kind"] == "run":
            from ..runs.case import case_from_experiment

            doc = {**{k: config[k] for k in ("system", "workload", "run")}, "overrides": {}}
            case = case_from_experiment(doc)
            variation = case.options.variation
            Platform(case.system, Strategy.every_npu(variation) if variation else None)
    except AcesimError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None
