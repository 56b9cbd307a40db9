"""The compiled modules (``setup.py``, :mod:`acesim._compiled`): what runs compiled, the
Python source of the same modules giving the same golden figures, and the stale warning."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

import acesim
from acesim import _compiled

ROOT = Path(__file__).resolve().parent.parent

#: run in a fresh interpreter: the compiled modules imported from their Python source (a path
#: finder that knows only sources, ahead of the default one), then golden.py on its arguments
_FROM_SOURCE = """
import runpy, sys
from importlib.machinery import FileFinder, SourceFileLoader, PathFinder
# (read, not imported: importing acesim would import the compiled modules first)
NAMES = {"acesim." + m for m in runpy.run_path("src/acesim/_compiled.py")["MODULES"]}
class SourceFirst(PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name not in NAMES or not path:
            return None
        for entry in path:
            spec = FileFinder(entry, (SourceFileLoader, [".py"])).find_spec(name)
            if spec is not None:
                return spec
        return None
sys.meta_path.insert(0, SourceFirst)
sys.argv = ["golden.py", *sys.argv[1:]]
try:
    runpy.run_path("scripts/golden.py", run_name="__main__")
finally:
    for name in sorted(NAMES):
        print(name, sys.modules[name].__file__)
"""


def test_compiled_names_the_modules_that_run_compiled() -> None:
    names = acesim.compiled()
    assert set(names) <= {f"acesim.{m}" for m in _compiled.MODULES}
    for name in names:
        module = sys.modules.get(name) or __import__(name, fromlist=["_"])
        assert any(str(module.__file__).endswith(s) for s in EXTENSION_SUFFIXES), name
    # what a benchmark's header says of it
    said = _compiled.describe()
    assert f"{len(names)} of {len(_compiled.MODULES)}" in said if names else "Python" in said


@pytest.mark.parametrize(
    "pattern", ["comparison/ace-isca21-16/*", "collective/ace-isca21-16/*", "llm/*/tp2pp2vpp2/*"]
)
def test_the_python_source_of_the_compiled_modules_gives_the_golden_figures(
    pattern: str,
) -> None:
    """Compiled or not, the same figures to the last bit: the golden cases (recorded by
    either) rerun with every compiled module imported from its source."""
    if not acesim.compiled():
        pytest.skip("nothing is compiled here: every test runs the Python source")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", _FROM_SOURCE, "--check", "--only", pattern],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert " 0 differ, 0 not recorded" in out.stdout
    for name in acesim.compiled():
        assert f"{name} " in out.stdout and f"{name.rsplit('.', 1)[1]}.py" in out.stdout


def test_a_compiled_module_older_than_its_source_is_warned_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "src" / "acesim"
    (package / "engine").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text("")
    extension = package / "engine" / f"kernel{EXTENSION_SUFFIXES[0]}"
    source = package / "engine" / "kernel.py"
    extension.write_text("")
    source.write_text("")
    os.utime(extension, (1.0, 1.0))
    monkeypatch.setattr(_compiled, "_PACKAGE", package)
    with pytest.warns(UserWarning, match=r"acesim\.engine\.kernel: .* older than kernel\.py"):
        _compiled.warn_stale()
    os.utime(source, (1.0, 1.0))  # as old as its extension: nothing to say
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _compiled.warn_stale()
    assert _compiled.compiled() == ["acesim.engine.kernel"]
    (tmp_path / "pyproject.toml").unlink()  # a wheel's install: not checked
    os.utime(extension, (0.5, 0.5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _compiled.warn_stale()


def test_a_step_pickles_and_copies_by_its_fields_compiled_or_not() -> None:
    """Steps travel to pool workers: a compiled frozen dataclass refuses the default
    unpickling's attribute setting, so a step pickles as its constructor's arguments."""
    import copy
    import dataclasses
    import pickle

    from acesim.network.step import Step

    step = Step(1.5e6, "span", 2, "reduce", count=3, root=1, pieces=4)
    for again in (pickle.loads(pickle.dumps(step)), copy.copy(step), copy.deepcopy(step)):
        assert again == step and hash(again) == hash(step)
        assert dataclasses.astuple(again) == (1.5e6, "span", 2, "reduce", 3, 1, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.count = 2  # type: ignore[misc]
