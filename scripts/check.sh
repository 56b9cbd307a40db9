#!/usr/bin/env bash
# The project's test command: lint, type check (strict), import layers, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check src tests benchmarks scripts
ruff format --check src tests benchmarks scripts
mypy --strict src
lint-imports
# the tests on every core (pytest-xdist; loadgroup keeps an xdist_group, tests sharing a
# fixture, in one process); pass -n 0 to run them in this process
python -m pytest -p no:cacheprovider -n auto --dist loadgroup "$@"
