"""Figures written the same way every time: the same inputs give the same bytes.

Matplotlib stamps an SVG with the instant it was written and draws its element ids from a
random salt, and a PDF with its creation date; a PNG carries no date. :func:`save_figure`
writes without the dates and with a fixed salt, so a reproduction run twice writes identical
files (and a changed figure shows as a changed file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["save_figure"]

#: per file format, the metadata entries that would record when it was written, left out
_UNDATED: dict[str, dict[str, None]] = {
    ".svg": {"Date": None},
    ".pdf": {"CreationDate": None, "ModDate": None},
}

#: the salt of SVG element ids (matplotlib's default is random per process)
SVG_SALT = "acesim"


def save_figure(fig: Any, path: Path | str, **options: Any) -> None:
    """``fig.savefig(path, **options)``, deterministic (module docstring)."""
    import matplotlib  # (what draws the figure has imported it already)

    metadata = _UNDATED.get(Path(path).suffix.lower())
    with matplotlib.rc_context({"svg.hashsalt": SVG_SALT}):
        fig.savefig(path, metadata=metadata, **options)
