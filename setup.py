"""acesim's build: the event path's modules compiled with mypyc where it can, Python elsewhere.

The modules of ``acesim._compiled.MODULES`` (the fluid engine, the collective runtime, the
messages' shares, point-to-point messages) are compiled to C extensions by mypyc (mypy's
compiler: the same source, type-checked, run faster; docs/performance.md, "Compiled"). Where
mypyc or a C compiler is missing, or ``ACESIM_PURE_PYTHON`` is set, they install as Python:
the same results to the last bit, slower. ``python -c "import acesim;
print(acesim.compiled())"`` lists the modules that run compiled.
"""

from __future__ import annotations

import os
import runpy
import sys

from setuptools import setup

#: the modules compiled (``acesim._compiled.MODULES``), as paths from this directory
COMPILED = [
    "src/acesim/" + module.replace(".", "/") + ".py"
    for module in runpy.run_path("src/acesim/_compiled.py")["MODULES"]
]


def _extensions() -> list[object]:
    if os.environ.get("ACESIM_PURE_PYTHON"):
        return []
    try:
        from mypyc.build import mypycify

        # type-checked as a compiler needs (the project's strict checks are the test
        # command's); a dependency missing here is Any
        modules = mypycify(
            ["--config-file", "", "--ignore-missing-imports", "--follow-imports", "silent",
             *COMPILED],
            opt_level="3",
        )  # fmt: skip
    except (Exception, SystemExit) as exc:  # noqa: BLE001 (any failure: install as Python)
        print(f"acesim: not compiled ({exc!r}); installing as Python", file=sys.stderr)
        return []
    for module in modules:
        module.optional = True  # no C compiler: skipped, the module stays Python
    return list(modules)


setup(ext_modules=_extensions())
