"""Running the golden corpus (tests/golden_cases.py): each case's key numbers, the data files
under tests/golden/ and the differences between two sets of numbers.

What a refactor may change and what it must not:

* **How a case runs** lives in :func:`run_case`: the ``acesim`` command line in this process
  (``typer.testing.CliRunner`` on ``acesim.cli.app``, with ``--json``), or a call of the public
  Python API (:data:`API`). A renamed flag or API function is changed there (or in the case
  list), once.
* **Which numbers a run kind has** lives in one small function per kind (:data:`EXTRACT`),
  reading that kind's JSON document: when a result's schema changes, only that function
  changes. Numbers are keyed by dotted paths (``bound_by.compute: HBM``, ``4096.busbw``,
  ``ace[ACE].iteration_time``); text, flags and the inputs a result echoes back (settings,
  assumptions) are not recorded.
* **The numbers themselves** must not move: they are compared exactly after a JSON round trip
  (JSON floats written with ``repr`` precision, so every float reads back bit for bit).
* **How each case ran** is recorded beside its numbers (:func:`facts_of`: the run kinds,
  simulation modes and endpoint kinds its document names) and must not move either; it is what
  :func:`coverage` counts to show (and the test to assert) that the corpus covers every
  registered run kind, endpoint kind and mode, with and without variation.
"""

from __future__ import annotations

import fnmatch
import json
import math
import shlex
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clitools import cli_json, cli_stdout
from golden_cases import CASES, INPUTS, KINDS, VARIATIONS, GoldenCase, inputs_of, variation_of

from acesim.hardware.endpoints import ENDPOINT_KINDS
from acesim.hardware.strategy import MODES
from acesim.runs.kinds import RUN_KINDS

__all__ = [
    "DATA_DIR",
    "Coverage",
    "Difference",
    "compare_facts",
    "compare_numbers",
    "coverage",
    "entry",
    "facts_of",
    "numbers_of",
    "prepare_inputs",
    "read_corpus",
    "run_case",
    "select",
    "write_corpus",
]

#: Where the recorded numbers live: one file per run kind.
DATA_DIR = Path(__file__).resolve().parent / "golden"
SCHEMA = "acesim.golden/1"
Numbers = dict[str, float]
#: How a case ran: ``kinds``, ``modes`` and ``endpoints``, each the sorted registered names
#: its document says (:func:`facts_of`).
Facts = dict[str, list[str]]


# --- inputs ---------------------------------------------------------------------------------


def _fill(arg: str, inputs: Path) -> str:
    return arg.replace("{inputs}", str(inputs))


def prepare_inputs(names: Iterable[str], inputs: Path) -> None:
    """Write the named :data:`~golden_cases.INPUTS` into ``inputs`` (each once)."""
    for name in names:
        if (inputs / f".{name}.done").exists():
            continue
        how, what = INPUTS[name]
        if how == "text":  # it may name other inputs ({inputs}/<name>, a jobs spec's workload)
            prepare_inputs(inputs_of((what,)), inputs)
            (inputs / name).write_text(_fill(what, inputs), encoding="utf-8")
        else:
            args = tuple(shlex.split(what))
            prepare_inputs(inputs_of(args), inputs)
            cli_stdout("export-chakra", str(inputs / name), *(_fill(a, inputs) for a in args))
        (inputs / f".{name}.done").write_text("", encoding="utf-8")


# --- running --------------------------------------------------------------------------------


def _api_compare(**params: Any) -> Any:
    import acesim

    return acesim.compare(**params).to_dict()


def _api_collective(**params: Any) -> Any:
    import acesim
    from acesim.config.variation import LinkChange, Straggler, Variation

    for key in ("dims", "host_copy", "compute"):
        if key in params:
            params[key] = tuple(params[key])
    if "stragglers" in params or "links" in params:
        stragglers = tuple(Straggler(**s) for s in params.pop("stragglers", ()))
        links = tuple(LinkChange(**link) for link in params.pop("links", ()))
        params["variation"] = Variation(stragglers=stragglers, links=links)
    return {"results": [acesim.simulate_collective(**params).to_dict()]}


def _api_llm(**params: Any) -> Any:
    import acesim

    parallel = acesim.parse_parallel(
        params.pop("parallel"),
        global_batch=params.pop("global_batch"),
        micro_batch=params.pop("micro_batch", 1),
        seq=params.pop("seq"),
    )
    system, model = params.pop("system"), params.pop("model")
    mode = params.pop("mode", None)
    case = acesim.make_llm_case(system, model, parallel, **params)
    result, _execution = acesim.run_llm(case, mode=mode)
    return result.to_dict()


def _api_reproduce(**params: Any) -> Any:
    """The ACE paper's reproduction, reduced (no sensitivity study, one HBM target)."""
    from acesim.config import load_system
    from acesim.studies.reproduce import reproduce

    system = load_system(params.pop("system"))
    with tempfile.TemporaryDirectory() as out:
        return reproduce(system, Path(out), workers=1, figures=False, hbm_targets=False, **params)


def _api_study_2026(**params: Any) -> Any:
    """The 2026 study on one small case (every substrate) on ``systems``."""
    from acesim.studies.ace2026 import StudyCase, study_2026

    systems = params.pop("systems")
    case = StudyCase(**params, source="golden corpus")
    with tempfile.TemporaryDirectory() as out:
        return study_2026(Path(out), systems=systems, cases=[case], workers=1, figures=False)


#: Python API entry points a case may call (``GoldenCase.api``) with its ``params``.
API: dict[str, Callable[..., Any]] = {
    "compare": _api_compare,
    "simulate_collective": _api_collective,
    "llm": _api_llm,
    "reproduce": _api_reproduce,
    "study_2026": _api_study_2026,
}


def run_case(case: GoldenCase, inputs: Path) -> tuple[Numbers, Facts]:
    """Run ``case`` (its inputs written into ``inputs`` first): its numbers and how it ran."""
    if case.argv:
        prepare_inputs(inputs_of(case.argv), inputs)
        document = cli_json(*(_fill(a, inputs) for a in case.argv))
    else:
        document = API[case.api](**json.loads(json.dumps(case.params)))
    return numbers_of(case.kind, document), facts_of(document)


# --- how a case ran -------------------------------------------------------------------------

#: document key -> (the facts' name, the registered names it may hold)
_FACT_KEYS = {
    "kind": ("kinds", RUN_KINDS.names()),
    "mode": ("modes", MODES),
    "endpoint": ("endpoints", ENDPOINT_KINDS.names()),
}


def facts_of(document: Any) -> Facts:
    """The run kinds, modes and endpoint kinds a run's document names anywhere (every
    ``kind``, ``mode`` and ``endpoint`` whose value is a registered name: a comparison's runs,
    a job's runs, each collective size's row), each sorted."""
    found: dict[str, set[str]] = {name: set() for name, _known in _FACT_KEYS.values()}

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                fact = _FACT_KEYS.get(key)
                if fact is not None and isinstance(item, str) and item in fact[1]:
                    found[fact[0]].add(item)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(document)
    return {name: sorted(values) for name, values in found.items()}


# --- numbers: one extraction per run kind --------------------------------------------------------


def _flatten(value: Any, key: str, out: Numbers, skip: tuple[str, ...] = ()) -> None:
    """Every number in nested mappings under dotted keys (lists, text and flags skipped)."""
    if isinstance(value, bool) or value is None or isinstance(value, str | list):
        return
    if isinstance(value, int | float):
        out[key] = value
        return
    for name, item in value.items():
        if name not in skip:
            _flatten(item, f"{key}.{name}" if key else str(name), out, skip)


def _collective(doc: Any) -> Numbers:
    """``acesim collective --json`` (schema acesim.collective/1): per size in bytes."""
    out: Numbers = {}
    for row in doc["results"]:
        _flatten(row, f"{row['size']:.0f}", out)
    return out


def _run(doc: Any, prefix: str = "") -> Numbers:
    """``acesim run --endpoint KIND --json`` (acesim.run/2): the run's figures, what bound it,
    and the per-layer rows summed (fwd, ig, wg, comm, comm_bytes)."""
    out: Numbers = {}
    _flatten(doc, prefix, out, skip=("info",))
    layers = doc.get("layers") or []
    if layers:
        at = f"{prefix}.layers" if prefix else "layers"
        out[f"{at}.count"] = len(layers)
        for column in ("fwd", "ig", "wg", "comm", "comm_bytes"):
            out[f"{at}.{column}"] = math.fsum(row[column] for row in layers)
    return out


def _comparison(doc: Any) -> Numbers:
    """``acesim run --json`` comparing kinds (acesim.comparison/2): each kind's speedup and
    network-utilisation gain, its best variant's time, and every variant tried."""
    out: Numbers = {}
    for kind, entry in doc["endpoints"].items():
        out[f"{kind}.speedup"] = entry["speedup"]
        out[f"{kind}.net_util_gain"] = entry["net_util_gain"]
        out[f"{kind}.best.iteration_time"] = entry["best"]["iteration_time"]
        for tried in entry["tried"]:
            out.update(_run(tried, f"{kind}[{tried['info']['variant']}]"))
    if doc.get("no_overlap"):
        out.update(_run(doc["no_overlap"], "no_overlap"))
    return out


def _llm(doc: Any) -> Numbers:
    """``acesim run -w MODEL --json`` (acesim.llm/1), or ``{"runs": [...]}`` with
    ``--endpoints`` (keyed by endpoint kind)."""
    out: Numbers = {}
    if "runs" in doc:
        for run in doc["runs"]:
            _flatten(run, run["endpoint"], out)
    else:
        _flatten(doc, "", out)
    return out


def _reproduction(doc: Any) -> Numbers:
    """The reproduction's summary (acesim.reproduction/2): headline figures, every case,
    the HBM analysis and the SRAM sweep."""
    out: Numbers = {}
    _flatten(doc, "", out, skip=("paper", "cases", "membw", "deviations", "assumptions"))
    for case in doc["cases"]:
        _flatten(case, f"case[{case['workload']},{case['npus']}]", out, skip=("best_settings",))
    for row in doc["membw"]:
        _flatten(row, f"membw[{row['npus']}]", out)
    for row in doc["sram_sensitivity"]:
        out[f"sram[{row['workload']},{row['sram']:.0f}].iteration_time"] = row["iteration_time"]
    return out


def _study_2026(doc: Any) -> Numbers:
    """The 2026 study's summary (acesim.study-2026/1): per system and case, every substrate's
    figures and the best SM configuration's variants; the headline."""
    out: Numbers = {}
    for row in doc["results"]:
        _flatten(row, f"{row['system']}/{row['case']}", out, skip=("gpus",))
    _flatten(doc["headline"], "headline", out)
    return out


def _jobs(doc: Any) -> Numbers:
    """``acesim jobs --json`` (acesim.jobs/1): the makespan and each job's figures (its
    iteration times, alone, slowdown, bound and shared seconds)."""
    out: Numbers = {"makespan": doc["makespan"]}
    for job in doc["jobs"]:
        _flatten(job, job["name"], out)
        for k, seconds in enumerate(job["iterations"]):
            out[f"{job['name']}.iterations[{k}]"] = seconds
    return out


#: The numbers of each run kind's JSON document.
EXTRACT: dict[str, Callable[[Any], Numbers]] = {
    "collective": _collective,
    "run": _run,
    "comparison": _comparison,
    "llm": _llm,
    "reproduction": _reproduction,
    "study-2026": _study_2026,
    "jobs": _jobs,
}
assert set(EXTRACT) == set(KINDS)


def numbers_of(kind: str, document: Any) -> Numbers:
    """The key numbers of one run kind's JSON document, as they read back from JSON."""
    numbers = EXTRACT[kind](document)
    return dict(json.loads(json.dumps(numbers, allow_nan=False)))


# --- the data files ---------------------------------------------------------------------------


def _path(kind: str, data_dir: Path) -> Path:
    return data_dir / f"{kind}.json"


def read_corpus(data_dir: Path = DATA_DIR) -> dict[str, dict[str, Any]]:
    """Every recorded entry by case id: ``{"run": how, "numbers": {...}}``."""
    out: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        path = _path(kind, data_dir)
        if path.exists():
            out.update(json.loads(path.read_text(encoding="utf-8"))["cases"])
    return out


def write_corpus(entries: Mapping[str, Mapping[str, Any]], data_dir: Path = DATA_DIR) -> None:
    """Write ``entries`` (case id -> entry), one file per kind, in the case list's order."""
    data_dir.mkdir(parents=True, exist_ok=True)
    for kind in KINDS:
        cases = {c.id: entries[c.id] for c in CASES if c.kind == kind and c.id in entries}
        document = {"schema": SCHEMA, "kind": kind, "cases": cases}
        text = json.dumps(document, indent=1, allow_nan=False) + "\n"
        _path(kind, data_dir).write_text(text, encoding="utf-8")


def entry(case: GoldenCase, numbers: Numbers, facts: Facts) -> dict[str, Any]:
    return {"run": case.how(), "facts": facts, "numbers": numbers}


def select(pattern: str | None) -> list[GoldenCase]:
    """The cases whose id matches the shell-style ``pattern`` (all when None)."""
    return [c for c in CASES if pattern is None or fnmatch.fnmatchcase(c.id, pattern)]


# --- differences ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    """One number that moved (``old`` or ``new`` None: the metric appeared or vanished)."""

    case: str
    metric: str
    old: float | None
    new: float | None

    @property
    def relative(self) -> float | None:
        if self.old is None or self.new is None:
            return None
        if self.old == 0:
            return math.inf if self.new != 0 else 0.0
        return (self.new - self.old) / abs(self.old)

    def __str__(self) -> str:
        rel = self.relative
        change = "" if rel is None else f" ({rel:+.3e})"
        return f"{self.case}: {self.metric}: {self.old!r} -> {self.new!r}{change}"


def compare_numbers(
    case: str, old: Mapping[str, float], new: Mapping[str, float]
) -> list[Difference]:
    """Every metric whose value is not bit-identical (or that only one side has); an integer
    and the float of the same value are the same number, 0.0 and -0.0 are not."""
    out = []
    for metric in sorted(set(old) | set(new)):
        a, b = old.get(metric), new.get(metric)
        if a is None or b is None or float(a).hex() != float(b).hex():
            out.append(Difference(case, metric, a, b))
    return out


def compare_facts(case: str, old: Facts, new: Facts) -> list[str]:
    """One line per fact (run kinds, modes, endpoint kinds) that differs between two runs."""
    return [
        f"{case}: {name}: {old.get(name)} -> {new.get(name)}"
        for name in sorted(set(old) | set(new))
        if old.get(name) != new.get(name)
    ]


# --- coverage ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Coverage:
    """How many recorded cases ran each registered run kind, mode, endpoint kind and
    variation; the cases by (case kind, mode, variation) and by (run kind, endpoint kind);
    ``missing`` names each registered one no case ran."""

    cases: int
    run_kinds: dict[str, int]
    modes: dict[str, int]
    endpoints: dict[str, int]
    variations: dict[str, int]
    by_axis: dict[tuple[str, str, str], int]
    by_endpoint: dict[tuple[str, str], int]

    @property
    def missing(self) -> list[str]:
        return [
            f"{what} {name}"
            for what, counts in (
                ("run kind", self.run_kinds),
                ("mode", self.modes),
                ("endpoint kind", self.endpoints),
                ("variation", self.variations),
            )
            for name, n in counts.items()
            if n == 0
        ]

    def lines(self) -> list[str]:
        """The counts as text: one line per registry, then the cases by case kind x mode x
        variation (a case in several modes or with several variations counts in each)."""
        out = [f"{self.cases} cases"]
        for what, counts in (
            ("run kinds", self.run_kinds),
            ("modes", self.modes),
            ("endpoint kinds", self.endpoints),
            ("variation", self.variations),
        ):
            out.append(f"{what}: " + ", ".join(f"{k} {n}" for k, n in counts.items()))
        out.append(f"{'case kind':<14}{'mode':<11}{'variation':<20}cases")
        for (kind, mode, varied), n in sorted(self.by_axis.items()):
            out.append(f"{kind:<14}{mode:<11}{varied:<20}{n}")
        out.append(f"{'run kind':<14}" + "".join(f"{e:>13}" for e in self.endpoints))
        for kind in self.run_kinds:
            row = "".join(f"{self.by_endpoint.get((kind, e), 0):>13}" for e in self.endpoints)
            out.append(f"{kind:<14}{row}")
        out.append("missing: " + (", ".join(self.missing) or "none"))
        return out


def coverage(cases: Iterable[GoldenCase], recorded: Mapping[str, Mapping[str, Any]]) -> Coverage:
    """The coverage of ``cases`` by their recorded facts (a case not recorded counts in none)
    and their variation (:func:`golden_cases.variation_of`)."""
    listed = list(cases)
    run_kinds = dict.fromkeys(RUN_KINDS.names(), 0)
    modes = dict.fromkeys(MODES, 0)
    endpoints = dict.fromkeys(ENDPOINT_KINDS.names(), 0)
    variations = dict.fromkeys(VARIATIONS, 0)
    by_axis: dict[tuple[str, str, str], int] = {}
    by_endpoint: dict[tuple[str, str], int] = {}
    for case in listed:
        facts = recorded.get(case.id, {}).get("facts", {})
        varied = variation_of(case)
        for counts, names in (
            (run_kinds, facts.get("kinds", [])),
            (modes, facts.get("modes", [])),
            (endpoints, facts.get("endpoints", [])),
            (variations, varied),
        ):
            for name in names:
                counts[name] += 1
        for mode in facts.get("modes") or ["-"]:
            for name in varied or ("none",):
                key = (case.kind, mode, name)
                by_axis[key] = by_axis.get(key, 0) + 1
        for kind in facts.get("kinds", []):
            for endpoint in facts.get("endpoints", []):
                by_endpoint[kind, endpoint] = by_endpoint.get((kind, endpoint), 0) + 1
    return Coverage(len(listed), run_kinds, modes, endpoints, variations, by_axis, by_endpoint)
