"""Which of acesim's modules run compiled, and a warning where a compiled one is stale.

``setup.py`` compiles :data:`MODULES` with mypyc where it can (docs/performance.md,
"Compiled"): each is then a C extension beside its source, which Python imports instead of
the source. In a source checkout installed editable (``pip install -e .``) an edit to such a
source does nothing until the next install; :func:`warn_stale` says so at import. Standard
library only: ``setup.py`` reads :data:`MODULES` from this file before anything is installed.
"""

from __future__ import annotations

import warnings
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

__all__ = ["MODULES", "compiled", "describe", "warn_stale"]

#: the modules mypyc compiles (the event path: the fluid engine, the collective runtime and its
#: agreed admission orders, the messages' HBM shares, point-to-point messages, the collective
#: plans with their phases and repeated steps, the NPU and its kernel folds, ACE, the graph
#: executor and its bound recorders, the step folds, and the interval and repeated-sum
#: arithmetic they use), relative to the package
MODULES = (
    "engine.kernel",
    "engine.heap",
    "engine.fluid",
    "network.collective",
    "network.agreement",
    "network.step",
    "network.shares",
    "network.p2p",
    "network.plan",
    "network.phase",
    "network.repeats",
    "hardware.npu",
    "hardware.kernel_fold",
    "hardware.endpoints.ace",
    "training.executor",
    "training.bounds",
    "training.job_bounds",
    "network.fold",
    "intervals",
    "sums",
)

_PACKAGE = Path(__file__).resolve().parent


def _extension(module: str) -> Path | None:
    """The compiled extension of ``module`` beside its source, if any."""
    base = _PACKAGE.joinpath(*module.split("."))
    for suffix in EXTENSION_SUFFIXES:
        path = base.with_name(base.name + suffix)
        if path.exists():
            return path
    return None


def compiled() -> list[str]:
    """The modules of :data:`MODULES` that run compiled here (``acesim.engine.kernel`` ...)."""
    return [f"acesim.{m}" for m in MODULES if _extension(m) is not None]


def describe() -> str:
    """One line for a benchmark's header: how many of :data:`MODULES` run compiled."""
    done = compiled()
    if not done:
        return "the event path as Python (not compiled: docs/performance.md, Compiled)"
    return f"the event path compiled ({len(done)} of {len(MODULES)} modules, mypyc)"


def warn_stale() -> None:
    """In a source checkout (a ``pyproject.toml`` beside ``src/``), warn of each compiled
    module older than its source: Python runs the compiled one, the edit is not run."""
    if not (_PACKAGE.parent.parent / "pyproject.toml").exists():
        return  # installed from a wheel: sources and extensions are the release's
    for module in MODULES:
        extension = _extension(module)
        source = _PACKAGE.joinpath(*module.split(".")).with_suffix(".py")
        if extension is not None and source.stat().st_mtime > extension.stat().st_mtime:
            warnings.warn(
                f"acesim.{module}: its compiled module {extension.name} is older than "
                f"{source.name}, and runs instead of it; rebuild (pip install -e .) or delete "
                f"{extension}",
                stacklevel=2,
            )
