"""Test configuration: Hypothesis runs derandomized under CI, so a landing never depends on
which random examples a run happened to draw (locally it explores new examples each run)."""

from __future__ import annotations

import os

from hypothesis import settings

# pytest-xdist's workers inherit COLUMNS=80 from execnet; rich's consoles would then be fixed at
# 80 columns when acesim is imported, and the width a test gives the CLI (CliRunner's env) would
# be ignored. Without it they size themselves at each print, as in a single process.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
