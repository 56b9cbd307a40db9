"""One entry point for workloads: a model-zoo name or a workload file.

``load_workload("resnet50")`` builds a zoo model (:mod:`acesim.workload.zoo`, which takes the
per-NPU batch and the training precision); ``load_workload("path/to/Resnet50_DataParallel.txt")``
reads an ASTRA-sim 1.0 text file (:mod:`acesim.workload.astra`), whose compute times and
collective sizes are fixed, so the batch and precision options are rejected for files rather
than silently ignored. Chakra execution traces (``.et``) are not read here.

A string names a file when that path exists or when it ends in ``.txt`` (so a mistyped file
name reports a missing file, not an unknown zoo model) or contains a path separator.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path

from ..errors import WorkloadError
from .astra import read_astra_workload
from .model import Workload

__all__ = ["load_workload"]

_ZOO_MODULE = __name__.rsplit(".", 1)[0] + ".zoo"


def looks_like_path(text: str) -> bool:
    """Whether ``text`` names a workload file rather than a model (a ``.txt`` name, a path, or
    a file that exists)."""
    return (
        text.endswith(".txt")
        or os.sep in text
        or (os.altsep is not None and os.altsep in text)
        or Path(text).exists()
    )


def load_workload(
    name_or_path: str | os.PathLike[str],
    *,
    batch_per_npu: int | None = None,
    precision: str | None = None,
) -> Workload:
    """Load a workload by zoo name or from a file.

    Args:
        name_or_path: a zoo model name (``resnet50``, ...) or the path of an ASTRA-sim 1.0
            text workload (``.txt``).
        batch_per_npu: samples per NPU per iteration (zoo models only; None = the model's
            default).
        precision: the training precision, a :data:`acesim.precision.PRECISIONS` name (zoo
            models only; None = the model's default).

    Raises:
        WorkloadError: a missing or invalid file, a Chakra trace, batch/precision options
            given with a file, or an unknown zoo name.
        ConfigError: an unknown precision.
    """
    text = os.fspath(name_or_path)
    if text.endswith(".et"):
        raise WorkloadError(
            "Chakra execution traces (.et) are not read by load_workload; use the Chakra "
            "importer (acesim.workload.chakra)",
            location=text,
        )
    if looks_like_path(text):
        for option, value in (("batch_per_npu", batch_per_npu), ("precision", precision)):
            if value is not None:
                raise WorkloadError(
                    f"applies to zoo models only; a workload file fixes its own compute times "
                    f"and sizes, got {value!r}",
                    location=text,
                    field=option,
                )
        return read_astra_workload(text)
    # Imported here, not at the top: the zoo is optional for this module and heavier to load.
    try:
        zoo = importlib.import_module(_ZOO_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != _ZOO_MODULE:
            raise
        zoo = None
    load_zoo: Callable[..., Workload] | None = getattr(zoo, "load_zoo", None)
    if load_zoo is None:
        raise WorkloadError(
            "not a workload file, and the model zoo is not available in this installation",
            location=text,
        )
    return load_zoo(text, batch_per_npu=batch_per_npu, precision=precision)
