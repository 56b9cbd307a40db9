#!/usr/bin/env bash
# The project's test command: lint, type check (strict), import layers, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check src tests benchmarks
mypy --strict src
lint-imports
python -m pytest -p no:cacheprovider "$@"
