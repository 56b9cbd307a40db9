"""Every fenced command and snippet of README.md and docs/ runs as written (at a small size):
a non-zero exit or a traceback fails the test. How blocks are found, made small and skipped:
tests/docsrun.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from docsrun import DOCUMENTS, FIXTURES, ROOT, SHELL, Block, blocks, commands, script
from typer.testing import CliRunner

from acesim.cli import app

#: Blocks in document order; a document's blocks share one scratch folder (later commands read
#: what earlier ones wrote, as a reader following the page would).
BLOCKS = [b for doc in DOCUMENTS for b in blocks(doc)]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Path]:
    """One folder per document, with ``examples/`` and the :data:`FIXTURES`."""
    folders: dict[Path, Path] = {}
    for doc in DOCUMENTS:
        folder = tmp_path_factory.mktemp(doc.stem)
        (folder / "examples").symlink_to(ROOT / "examples")
        for name, text in FIXTURES.items():
            (folder / name).write_text(text, encoding="utf-8")
        folders[doc] = folder
    return folders


def test_the_runner_finds_the_documented_blocks() -> None:
    ids = {b.id.split(":")[0] for b in BLOCKS}
    assert {"README.md", "docs/trace.md", "docs/chakra.md", "docs/sweeps.md"} <= ids
    skipped = [b for b in BLOCKS if b.skip]
    assert len(skipped) <= 8, [b.id for b in skipped]  # few, each with its reason


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_documented_block_runs(
    block: Block, scratch: dict[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    if block.skip:
        pytest.skip(block.skip)
    folder = scratch[block.document]
    monkeypatch.chdir(folder)
    if block.language in SHELL:
        for argv in commands(block):
            assert argv[0] == "acesim", f"{block.id}: not an acesim command: {argv}"
            out = CliRunner().invoke(app, argv[1:])
            shown = " ".join(argv)
            assert out.exception is None or isinstance(out.exception, SystemExit), (
                f"{block.id}: {shown}: {out.exception!r}\n{out.output[-2000:]}"
            )
            assert out.exit_code == 0, f"{block.id}: {shown} exited {out.exit_code}\n{out.output}"
            assert "Traceback" not in out.output, f"{block.id}: {shown}\n{out.output}"
        return
    path = folder / f"block_{block.line}.py"
    path.write_text(script(block), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *sys.path])}
    done = subprocess.run(
        [sys.executable, path.name],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{block.id}: exit {done.returncode}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, f"{block.id}\n{done.stderr[-3000:]}"
