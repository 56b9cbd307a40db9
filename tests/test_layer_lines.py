"""scripts/layer_lines.py: the orchestration layer's lines against the rename commit's parent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import layer_lines  # noqa: E402


def _has_base() -> bool:
    check = ["git", "cat-file", "-e", f"{layer_lines.BASE}^{{commit}}"]
    return subprocess.run(check, cwd=ROOT, capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _has_base(), reason="history before 0cec95d not cloned")


def test_every_file_of_a_place_is_counted_once_as_base_or_added() -> None:
    rows = layer_lines.place_files("src/acesim/runs", "src/acesim/experiment")
    paths = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "src/acesim/runs").rglob("*.py"))
    assert sorted(row.path for row in rows) == paths
    by_path = {row.path: row for row in rows}
    # runs/llm.py is experiment/llm.py renamed; runs/kinds.py came with the one run path
    assert by_path["src/acesim/runs/llm.py"].base_lines is not None
    assert by_path["src/acesim/runs/kinds.py"].base_lines is None
    assert by_path["src/acesim/runs/kinds.py"].added_by
    for row in rows:
        assert row.lines == (ROOT / row.path).read_bytes().count(b"\n")


def test_the_base_total_is_the_issue_s_7081_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert layer_lines.main([]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith("against 7,081 at 0cec95d^")
