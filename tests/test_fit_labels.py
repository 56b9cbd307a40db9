"""Every fitted value is labelled a fit, with the rows it consumed, on the preset that owns the
rows; every value carried from another system's fit is a transfer, and is what its rule gives."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from acesim.config import single_npu_system
from acesim.config.npus import npu_preset_names
from acesim.config.presets import load_system, preset_names
from acesim.config.system import SystemConfig
from acesim.validation import load_corpus
from acesim.validation.fit import value_at
from acesim.validation.loso import Presets, fittable, owner
from acesim.validation.transfer import LINEAGE, RULES, transfer

PRESETS = Presets.of(load_corpus())
SYSTEM_PRESETS = preset_names()
NPU_PRESETS = npu_preset_names()


def _system(name: str) -> SystemConfig:
    return single_npu_system(name) if name in NPU_PRESETS else load_system(name)


def _source_key(system: SystemConfig, parameter: str) -> str:
    """The [sources] key of a parameter (a per-dtype table entry is sourced as its table)."""
    if parameter in system.sources or parameter.count(".") != 3:
        return parameter
    return parameter.rsplit(".", 1)[0]


def _fitted_paths() -> set[str]:
    """Every parameter path fitted on some preset, a table entry also as its table."""
    paths = {p for _, p in PRESETS.fitted}
    return paths | {p.rsplit(".", 1)[0] for p in paths if p.count(".") == 3}


@pytest.mark.parametrize("key", sorted(PRESETS.fitted), ids=lambda k: f"{k[0]}:{k[1]}")
def test_every_fitted_parameter_is_labelled_fit_with_the_rows_it_consumed(
    key: tuple[str, str],
) -> None:
    preset, parameter = key
    system = _system(preset)
    source = system.sources.get(_source_key(system, parameter))
    assert source is not None, f"{preset}: {parameter} is fitted but has no [sources] entry"
    assert source.kind == "fit", f"{preset}: {parameter} is fitted but labelled {source.kind}"
    for row in PRESETS.fitted[key]:
        assert row in source.note, f"{preset}: {parameter}'s note does not name its row {row}"


@pytest.mark.parametrize("preset", [*SYSTEM_PRESETS, *NPU_PRESETS])
def test_a_fit_label_names_a_parameter_fitted_on_the_presets_own_rows(preset: str) -> None:
    system = _system(preset)
    fitted = {(p, k.rsplit(".", 1)[0] if k.count(".") == 3 else k) for p, k in PRESETS.fitted}
    fitted |= set(PRESETS.fitted)
    for path, source in system.sources.items():
        if source.kind == "fit":
            assert (owner(preset, path), path) in fitted, (
                f"{preset}: {path} is labelled fit but no corpus row of "
                f"{owner(preset, path)} fits it (a value fitted elsewhere is a transfer)"
            )


@pytest.mark.parametrize("preset", [*SYSTEM_PRESETS, *NPU_PRESETS])
def test_a_parameter_fitted_anywhere_is_a_fit_or_a_transfer_wherever_it_is_sourced(
    preset: str,
) -> None:
    """An assumption or a public figure taken as is for a parameter the corpus fits somewhere
    is a carried fit or an unchecked measurement (a paper's, a datasheet's or ASTRA-sim's stated
    setting is the system's own)."""
    system = _system(preset)
    for path, source in system.sources.items():
        if path in _fitted_paths():
            assert source.kind not in ("assumption", "public-measurement"), (
                f"{preset}: {path} is fitted on a corpus row somewhere; here it is labelled "
                f"{source.kind} (a value carried from another system's fit is a transfer)"
            )


@pytest.mark.parametrize("preset", [*SYSTEM_PRESETS, *NPU_PRESETS])
def test_every_transfer_is_what_its_rule_gives_from_the_shipped_fits(preset: str) -> None:
    system = _system(preset)
    fits = PRESETS.shipped_fits()
    names = {r.name for r in RULES}
    for path, source in system.sources.items():
        if source.kind != "transfer":
            continue
        assert fittable(path), f"{preset}: {path} is a transfer of a parameter nothing fits"
        t = transfer(owner(preset, path), path, fits)
        carried = value_at(system, path)
        if t.value is None or carried is None:
            assert t.value == carried, (preset, path)
        else:
            assert carried == pytest.approx(t.value, rel=5e-4), (preset, path, t)
        assert t.rule.name in names and t.rule.name in source.note, (preset, path, t.rule.name)
        for other in t.drawn_from:
            assert other in source.note, f"{preset}: {path}'s note does not name {other}"


def test_every_npu_preset_states_its_lineage() -> None:
    assert sorted(LINEAGE) == sorted(NPU_PRESETS)


_FIT_WORD = re.compile(r"#.*\bfit(ted)?\b", re.IGNORECASE)


@pytest.mark.parametrize("preset", SYSTEM_PRESETS)
def test_a_value_a_comment_calls_fitted_is_labelled_fit_or_transfer(preset: str) -> None:
    """A fit that lives only in a TOML comment fails: a key whose line comment says it was
    fitted, or a comment naming a corpus fit row, needs its [sources] label."""
    text = resources.files("acesim.config").joinpath("presets", f"{preset}.toml").read_text()
    system = load_system(preset)
    table = ""
    rows = {row for ids in PRESETS.fitted.values() for row in ids}
    for line in text.splitlines():
        head = re.match(r"^\[+([^\]]+)\]+", line)
        if head:
            table = head.group(1)
            continue
        assert not any(row in line for row in rows if line.lstrip().startswith("#")), (
            f"{preset}: a comment names a fit row: {line.strip()}"
        )
        key = re.match(r"^([A-Za-z_]+)\s*=", line)
        if key and _FIT_WORD.search(line):
            path = f"{table}.{key.group(1)}" if table else key.group(1)
            path = path.replace("network.dimensions", "network.dimensions[0]")
            source = system.sources.get(path)
            assert source is not None and source.kind in ("fit", "transfer"), (preset, path)
