#!/usr/bin/env bash
# The project's test command: lint, type check, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check src tests benchmarks
mypy --strict src
python -m pytest -p no:cacheprovider "$@"
