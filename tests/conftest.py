"""Test configuration: Hypothesis runs derandomized under CI, so a landing never depends on
which random examples a run happened to draw (locally it explores new examples each run)."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
