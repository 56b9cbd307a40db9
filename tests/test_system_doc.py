"""docs/system-file.md is generated from the models and must not be stale."""

from __future__ import annotations

from pathlib import Path

import acesim  # noqa: F401  (registers the endpoint kinds the reference lists)
from acesim.config.reference import system_file_reference
from acesim.config.system import NPUConfig

DOC = Path(__file__).resolve().parents[1] / "docs" / "system-file.md"


def test_the_system_file_reference_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == system_file_reference(), (
        "docs/system-file.md is stale: run python scripts/gen_system_doc.py"
    )


def test_the_reference_lists_every_field_with_its_unit() -> None:
    text = system_file_reference()
    for name in NPUConfig.model_fields:
        assert f"| `{name}` |" in text
    assert "`hbm_bandwidth` | quantity (bytes/s:" in text
    for kind in ("baseline", "ace", "ideal"):
        assert f"## `[endpoint.{kind}]`" in text
