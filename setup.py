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
from setuptools.command.build_ext import build_ext

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
    return list(modules)


class _AllOrNothing(build_ext):
    """Builds every compiled module or none: mypyc's modules share one library, and a module
    built without it would fail at import. Any failure (no C compiler, no Python headers, a
    compiler's error) removes what was built, and the modules install as Python."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 (any failure: install as Python)
            print(f"acesim: not compiled ({exc!r}); installing as Python", file=sys.stderr)
            for extension in self.extensions:
                built = self.get_ext_fullpath(extension.name)
                if os.path.exists(built):
                    os.remove(built)
            self.extensions = []


setup(ext_modules=_extensions(), cmdclass={"build_ext": _AllOrNothing})
