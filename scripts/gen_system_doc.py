"""Write docs/system-file.md from the pydantic models (acesim.config.reference).

Usage: python scripts/gen_system_doc.py
"""

from __future__ import annotations

from pathlib import Path

from acesim.config.reference import system_file_reference

TARGET = Path(__file__).resolve().parents[1] / "docs" / "system-file.md"


def main() -> None:
    TARGET.write_text(system_file_reference(), encoding="utf-8")
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
