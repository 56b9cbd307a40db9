"""Results unchanged: every case of the golden corpus gives bit-identical numbers.

The corpus (tests/golden_cases.py, the one list) holds over 300 simulations: collectives of
every operation, size class, endpoint kind and preset, symmetric and exact, with forced
algorithms and protocols, searched variants, failed and slower links; training graphs (zoo
models, ASTRA-sim 1.0 text, Chakra traces exported and run back) with every endpoint kind, loop
and variation; LLM runs in class and exact mode over tp/pp/vpp/cp/ep/zero, overlap,
recomputation, every variation and the 2026 study's layouts; multi-job runs on every endpoint
kind; comparisons of endpoint kinds with the baseline's searched variants; and the paper
reproduction's and the 2026 study's code on reduced cases. Their numbers and how each ran (run
kinds, modes, endpoint kinds), recorded by ``python scripts/golden.py --update`` from the code
as it was, are in tests/golden/<kind>.json; ``python scripts/golden.py --coverage`` counts them
by axis.

Each case runs through the most stable interface there is: the ``acesim`` command line in this
process with ``--json`` (or the public Python API where the command line cannot say it), and one
small function per run kind reads its numbers (tests/golden_corpus.py, ``EXTRACT``). When a
refactor changes a flag, an API call or a JSON schema, change the case line or that function,
never the recorded numbers. When a change moves numbers on purpose (a model fix), re-record the
cases it moves with ``python scripts/golden.py --update --only 'PATTERN'`` and explain each
moved number's mechanism in the change. Numbers are compared exactly (floats after a JSON round
trip, written with repr precision): no tolerance.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from golden_cases import CASES, KINDS, GoldenCase
from golden_corpus import (
    Difference,
    compare_facts,
    compare_numbers,
    coverage,
    entry,
    read_corpus,
    run_case,
    write_corpus,
)

from acesim.hardware.strategy import MODES

RECORDED = read_corpus()


@pytest.fixture(scope="session")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The prepared inputs' folder (ASTRA-sim text, placement, Chakra traces), once per
    process."""
    return tmp_path_factory.mktemp("golden-inputs")


def _check(case: GoldenCase, inputs: Path) -> None:
    recorded = RECORDED.get(case.id)
    assert recorded is not None, (
        f"{case.id} has no recorded numbers: python scripts/golden.py --update --only '{case.id}'"
    )
    numbers, facts = run_case(case, inputs)
    differences = compare_numbers(case.id, recorded["numbers"], numbers)
    lines = "\n".join(str(d) for d in differences)
    assert not differences, (
        f"{len(differences)} numbers moved (case: metric: old -> new (relative)):\n{lines}\n"
        f"run: {case.how()}"
    )
    moved = compare_facts(case.id, recorded["facts"], facts)
    assert not moved, "it ran otherwise (case: what: old -> new):\n" + "\n".join(moved)


def _cases(*kinds: str) -> list[GoldenCase]:
    return [c for c in CASES if c.kind in kinds]


def _ids(case: GoldenCase) -> str:
    return case.id


@pytest.mark.parametrize("case", _cases("collective"), ids=_ids)
def test_collectives_unchanged(case: GoldenCase, inputs: Path) -> None:
    _check(case, inputs)


@pytest.mark.parametrize("case", _cases("run"), ids=_ids)
def test_training_graphs_unchanged(case: GoldenCase, inputs: Path) -> None:
    _check(case, inputs)


@pytest.mark.parametrize("case", _cases("llm"), ids=_ids)
def test_llm_runs_unchanged(case: GoldenCase, inputs: Path) -> None:
    _check(case, inputs)


@pytest.mark.parametrize("case", _cases("comparison"), ids=_ids)
def test_comparisons_unchanged(case: GoldenCase, inputs: Path) -> None:
    _check(case, inputs)


@pytest.mark.parametrize("case", _cases("reproduction", "study-2026"), ids=_ids)
def test_studies_unchanged(case: GoldenCase, inputs: Path) -> None:
    _check(case, inputs)


def test_the_corpus_records_every_case_and_nothing_else() -> None:
    listed = {c.id: c for c in CASES}
    assert sorted(RECORDED) == sorted(listed), "python scripts/golden.py --update"
    for case_id, recorded in RECORDED.items():
        assert recorded["run"] == listed[case_id].how(), case_id
        assert recorded["numbers"], case_id
    assert {c.kind for c in CASES} == set(KINDS)


def test_the_corpus_covers_every_run_kind_endpoint_kind_mode_and_variation() -> None:
    """At least 300 cases; the registries' names (run kinds, modes, endpoint kinds) each ran
    in some case, as its recorded document says, and each variation is asked for in some."""
    covered = coverage(CASES, RECORDED)
    assert covered.cases >= 300
    assert covered.missing == [], "\n".join(covered.lines())
    # every mode without variation; with it, exact mode alone (every NPU simulated)
    assert set(MODES) <= {mode for _kind, mode, varied in covered.by_axis if varied == "none"}
    assert {mode for _kind, mode, varied in covered.by_axis if varied != "none"} == {"exact"}


def test_a_moved_number_is_reported_with_old_new_and_relative_difference() -> None:
    old = {"time": 2.0, "busbw": 1.0, "gone": 3.0, "zero": 0.0}
    new = {"time": 2.0, "busbw": 1.0 + 2**-52, "added": 4.0, "zero": 0.0}
    differences = compare_numbers("c", old, new)
    assert [d.metric for d in differences] == ["added", "busbw", "gone"]
    assert differences[1] == Difference("c", "busbw", 1.0, 1.0 + 2**-52)
    assert differences[1].relative == 2**-52
    assert str(differences[1]) == "c: busbw: 1.0 -> 1.0000000000000002 (+2.220e-16)"
    assert differences[0].old is None and differences[2].new is None


def test_recorded_numbers_read_back_bit_for_bit(tmp_path: Path) -> None:
    case = CASES[0]
    numbers = {"a": 0.1 + 0.2, "b": 5e-324, "c": 1.7976931348623157e308, "d": 2**53, "e": -0.0}
    write_corpus({case.id: entry(case, numbers, {"modes": ["exact"]})}, tmp_path)
    back = read_corpus(tmp_path)[case.id]["numbers"]
    assert compare_numbers(case.id, numbers, back) == []
    assert compare_numbers(case.id, {"e": -0.0}, {"e": 0.0}) != []
    assert compare_numbers(case.id, {"n": 8}, {"n": 8.0}) == []
