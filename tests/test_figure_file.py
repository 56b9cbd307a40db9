"""Figures written twice from the same inputs are the same bytes (acesim.results.figure_file):
no write date in SVG or PDF metadata, SVG element ids from a fixed salt."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from acesim.results.figure_file import save_figure  # noqa: E402


def _figure() -> object:
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [1, 3, 2], label="a")
    ax.fill_between([0, 1, 2], [0, 1, 0], alpha=0.3)  # clip paths: ids from the salt
    ax.legend()
    return fig


@pytest.mark.parametrize("suffix", [".svg", ".png", ".pdf"])
def test_a_figure_written_twice_is_the_same_bytes(tmp_path: Path, suffix: str) -> None:
    written = []
    for i in range(2):
        fig = _figure()
        path = tmp_path / f"f{i}{suffix}"
        save_figure(fig, path, dpi=72)
        plt.close(fig)  # type: ignore[arg-type]
        written.append(path.read_bytes())
    assert written[0] == written[1]
    if suffix == ".svg":
        assert b"<dc:date>" not in written[0]
