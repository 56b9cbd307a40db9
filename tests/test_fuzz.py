"""The fuzz suite: generated inputs of every kind end in a finite result or one AcesimError.

System documents (any field set to any value), ASTRA-sim 1.0 text (mutated tokens, lines and
bytes), Chakra traces (mutated bytes), sweep specifications (random structures) and command
lines. The property, for each: no other exception, no non-finite number in a result, and a
bounded time. CI runs a few dozen examples of each (derandomized); set
``ACESIM_EXAMPLES_SCALE=100`` for a thorough local run (see tests/systems.py ``examples``).
"""

from __future__ import annotations

import atexit
import copy
import math
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from systems import examples
from typer.testing import CliRunner

import acesim
from acesim.cli import app
from acesim.config.paths import set_path
from acesim.config.presets import system_document, system_from_dict
from acesim.errors import AcesimError
from acesim.results.jsonout import first_non_finite
from acesim.runs import execute, make_case
from acesim.runs.llm import make_llm_case, run_llm
from acesim.sweep import load_spec
from acesim.training.loops import build_graph
from acesim.workload.astra import read_astra_workload, write_astra_workload
from acesim.workload.chakra import read_chakra, write_chakra
from acesim.workload.llm.models import TransformerConfig
from acesim.workload.llm.parallel import parse_parallel
from acesim.workload.model import Comm, Compute, Layer, Pass, Workload

#: Work bound for fuzzed runs: a fuzzed system may describe a huge network; the runtime's
#: message bound (collective.max_messages) refuses what would take longer than this.
FUZZ_MESSAGES = 20_000
FUZZ = settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

WEIRD_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
    st.none(),
    st.sampled_from(
        [
            "1e999",
            "nan",
            "-inf",
            "-1 GB/s",
            "4 MiB",
            "1e-320",
            "0",
            "",
            "ring",
            "x" * 300,
            "100 Gb/s",
            "1.5 us",
            "12",
            "[1, 2]",
        ]
    ),  # fmt: skip
    st.text(max_size=8),
    st.lists(st.integers(min_value=-3, max_value=10), max_size=3),
    st.dictionaries(st.sampled_from(["a", "size", "kind"]), st.integers(), max_size=2),
)


#: Values a valid document could hold (so that many examples get past validation and run).
PLAUSIBLE = st.one_of(
    st.floats(min_value=1e-9, max_value=1e13),
    st.integers(min_value=1, max_value=64),
    st.sampled_from([0.5, 0.25, "ring", "switch", "direct", "lifo", "900 GB/s", "1 us", "8 MiB"]),
)
VALUES = st.one_of(WEIRD_VALUES, PLAUSIBLE, PLAUSIBLE)


def _leaf_paths(doc: Any, prefix: str = "") -> list[str]:
    out: list[str] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _leaf_paths(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out += _leaf_paths(value, f"{prefix}[{i}]")
    if not out and prefix:
        out.append(prefix)
    return out


BASE = system_from_dict(system_document("ace-isca21")).model_dump(mode="json", exclude={"sources"})
PATHS = sorted(_leaf_paths(BASE)) + [
    "network.dimensions[0].name",
    "network.dimensions[1].name",
    "network.npus",
    "endpoint.kind",
    "collective.algorithms.all-reduce",
    "collective.algorithms.all-to-all",
]


def _finite(value: Any) -> None:
    where = first_non_finite(value)
    assert where is None, f"non-finite result at {where}"


def _bounded(system: acesim.SystemConfig) -> acesim.SystemConfig:
    bounded = system.model_copy(deep=True)
    bounded.collective.max_messages = FUZZ_MESSAGES
    return bounded


def _outcome(run: Callable[[], Any]) -> None:
    """The fuzz property: ``run()`` gives a result with finite numbers, or one AcesimError
    line (counted as hypothesis events for --hypothesis-show-statistics)."""
    try:
        result = run()
    except AcesimError as err:
        assert "\n" not in str(err)
        event(f"error: {type(err).__name__}")
        return
    event("result")
    _finite(result.to_dict())


def _mutated(mutations: list[tuple[str, Any]]) -> acesim.SystemConfig:
    doc = copy.deepcopy(BASE)
    for path, value in mutations:
        doc = set_path(doc, path, value)
    return _bounded(system_from_dict(doc))


@FUZZ
@given(
    st.lists(st.tuples(st.sampled_from(PATHS), VALUES), min_size=1, max_size=4),
    st.sampled_from(["baseline", "ace", "ideal"]),
    st.sampled_from(["all-reduce", "all-gather", "all-to-all", "reduce-scatter"]),
)
def test_any_system_document_gives_a_finite_result_or_one_error(
    mutations: list[tuple[str, Any]], endpoint: str, op: str
) -> None:
    _outcome(
        lambda: acesim.simulate_collective(_mutated(mutations), op, "1 MiB", endpoint=endpoint)
    )


@FUZZ
@given(
    st.lists(st.tuples(st.sampled_from(PATHS), VALUES), min_size=1, max_size=3),
)
def test_any_system_document_trains_to_a_finite_result_or_one_error(
    mutations: list[tuple[str, Any]],
) -> None:
    _outcome(
        lambda: execute(make_case(_mutated(mutations).with_endpoint("ideal"), _tiny_workload()))[0]
    )


def _tiny_workload() -> Workload:
    layer = Layer(
        "fc",
        forward=Pass(Compute(flops=1e9, hbm_bytes=1e6)),
        input_grad=Pass(Compute(flops=1e9, hbm_bytes=1e6)),
        weight_grad=Pass(Compute(flops=1e9, hbm_bytes=1e6), Comm("all-reduce", 2**20)),
    )
    return Workload("tiny", (layer, Layer("fc2", weight_grad=layer.weight_grad)))


# -- LLM parallel configurations -------------------------------------------------------------

#: A small dense transformer: each configuration it makes runs in a fraction of a second.
FUZZ_LLM = TransformerConfig(
    "fuzz-tiny", layers=8, hidden=512, heads=8, kv_heads=4, ffn=1408, vocab=8000, seq=256
)
#: ``--parallel`` items, valid and not: every key with in- and out-of-range values, and broken
#: syntax.
PARALLEL_ITEMS = st.lists(
    st.sampled_from(
        [
            "tp=1",
            "tp=2",
            "tp=4",
            "tp=3",
            "tp=0",
            "tp=-1",
            "tp=1e3",
            "tp=",
            "pp=2",
            "pp=4",
            "pp=16",
            "vpp=2",
            "vpp=3",
            "cp=2",
            "ep=2",
            "dp=auto",
            "dp=3",
            "sp=0",
            "sp=1",
            "sp=2",
            "tp_overlap=1",
            "zero=0",
            "zero=3",
            "zero=2",
            "recompute=selective",
            "recompute=full",
            "recompute=bogus",
            "recompute_layers=2",
            "recompute_modules=core_attn",
            "recompute_modules=mlp+layernorm",
            "schedule=zb-v",
            "schedule=dualpipev",
            "schedule=1f1b",
            "schedule=nope",
            "cuda_graphs=1",
            "offload=activations",
            "offload_fraction=0.5",
            "offload_fraction=nan",
            "offload_layers=2",
            "offload=optimizer",
            "offload=weights",
            "order=tp-cp-ep-pp-dp",
            "first_stage_layers=1",
            "account_embedding=1",
            "account_loss=1",
            "ep_comm_units=8",
            "shared_expert_overlap=1",
            "=2",
            "tp",
        ]
    ),  # fmt: skip
    max_size=3,
)


@FUZZ
@given(
    st.sampled_from(["tp=1,pp=1", "tp=2,pp=1", "tp=2,pp=2", "tp=1,pp=4", "tp=4,pp=2"]),
    PARALLEL_ITEMS,
    st.sampled_from(["h100-nvswitch-8", "b200-nvswitch-8", "mi300x-8"]),
    st.sampled_from([1, 1, 2]),
    st.sampled_from([16, 32, 32, 64, 0, 24]),
    st.sampled_from([1, 1, 2, 3]),
    st.sampled_from([256, 256, 128, 100]),
    st.sampled_from(["bf16", "bf16", "fp8", "fp16", "int4"]),
)
def test_any_llm_configuration_runs_to_a_finite_result_or_one_error(
    base: str,
    items: list[str],
    system: str,
    nodes: int,
    global_batch: int,
    micro_batch: int,
    seq: int,
    precision: str,
) -> None:
    def run() -> Any:
        # later items replace the base's tp and pp (a key given twice is an error of its own)
        keys = {item.partition("=")[0] for item in items}
        kept = [part for part in base.split(",") if part.partition("=")[0] not in keys]
        parallel = parse_parallel(
            ",".join(kept + items), global_batch=global_batch, micro_batch=micro_batch, seq=seq
        )
        case = make_llm_case(system, FUZZ_LLM, parallel, precision=precision, nodes=nodes)
        return run_llm(case)[0]

    _outcome(run)


# -- ASTRA-sim 1.0 text ----------------------------------------------------------------------

_ASTRA_DIR = Path(tempfile.mkdtemp(prefix="acesim-fuzz-astra-"))
atexit.register(shutil.rmtree, _ASTRA_DIR, ignore_errors=True)  # one folder a run, removed
_ASTRA_VALID = _ASTRA_DIR / "valid.txt"
write_astra_workload(
    Workload(
        "w",
        tuple(
            Layer(
                f"l{i}",
                forward=Pass(Compute(duration=1e-6)),
                input_grad=Pass(Compute(duration=2e-6)),
                weight_grad=Pass(Compute(duration=3e-6), Comm("all-reduce", 4096.0 * (i + 1))),
            )
            for i in range(3)
        ),
    ),
    _ASTRA_VALID,
)
ASTRA_LINES = _ASTRA_VALID.read_text(encoding="utf-8").splitlines()
TOKENS = st.one_of(
    st.sampled_from(
        [
            "-1",
            "0",
            "1e400",
            "9" * 320,
            "NONE",
            "ALLREDUCE",
            "ALLTOALL",
            "DATA",
            "MICRO",
            "HYBRID_DLRM",
            "nan",
            "",
            "\t",
            "ÿ",
            "-0",
        ]
    ),  # fmt: skip
    st.text(max_size=6),
    st.integers(min_value=-(2**64), max_value=2**64).map(str),
)


@FUZZ
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["token", "drop", "dup", "bytes"]),
            st.integers(min_value=0, max_value=40),
            st.integers(min_value=0, max_value=20),
            TOKENS,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_any_astra_text_reads_to_a_workload_or_one_error(
    edits: list[tuple[str, int, int, str]],
) -> None:
    lines = list(ASTRA_LINES)
    for kind, line, col, token in edits:
        i = line % len(lines) if lines else 0
        if kind == "token" and lines:
            parts = lines[i].split("\t")
            parts[col % len(parts)] = token
            lines[i] = "\t".join(parts)
        elif kind == "drop" and lines:
            del lines[i]
        elif kind == "dup" and lines:
            lines.insert(i, lines[i])
        elif lines:
            lines[i] = (
                lines[i][: col % (len(lines[i]) + 1)]
                + token
                + lines[i][col % (len(lines[i]) + 1) :]
            )
    path = _ASTRA_DIR / "mutated.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    system = _bounded(acesim.load_system("ace-isca21").with_endpoint("ideal"))
    _outcome(lambda: execute(make_case(system, build_graph(read_astra_workload(path), 3)))[0])


# -- Chakra traces ---------------------------------------------------------------------------

_CHAKRA_DIR = Path(tempfile.mkdtemp(prefix="acesim-fuzz-chakra-"))
atexit.register(shutil.rmtree, _CHAKRA_DIR, ignore_errors=True)  # one folder a run, removed
_CHAKRA_FILES = write_chakra(build_graph(_tiny_workload(), 1), _CHAKRA_DIR / "t", npus=2)
CHAKRA_BYTES = [p.read_bytes() for p in _CHAKRA_FILES]


@FUZZ
# a read that warns (skipped nodes) is an outcome like any other
@pytest.mark.filterwarnings("ignore::acesim.workload.chakra.reader.ChakraWarning")
@given(
    st.integers(min_value=0, max_value=1),
    st.lists(
        st.tuples(
            st.sampled_from(["flip", "cut", "insert"]),
            st.integers(min_value=0, max_value=10_000),
            st.binary(min_size=1, max_size=8),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_any_chakra_bytes_read_to_a_graph_or_one_error(
    rank: int, edits: list[tuple[str, int, bytes]]
) -> None:
    data = bytearray(CHAKRA_BYTES[rank])
    for kind, at, chunk in edits:
        i = at % (len(data) + 1)
        if kind == "flip" and data:
            data[i % len(data)] ^= chunk[0] or 0xFF
        elif kind == "cut":
            del data[i:]
        else:
            data[i:i] = chunk
    folder = Path(tempfile.mkdtemp(dir=_CHAKRA_DIR))
    for r, original in enumerate(CHAKRA_BYTES):
        (folder / f"t.{r}.et").write_bytes(bytes(data) if r == rank else original)
    system = _bounded(
        acesim.config.resolve.resolve_system("ace-isca21", shape=[2, 1, 1]).with_endpoint("ideal")
    )
    _outcome(
        lambda: execute(make_case(system, read_chakra(str(folder / "t")), warmup=0, mode="exact"))[
            0
        ]
    )


# -- sweep specifications --------------------------------------------------------------------

SPEC_KEYS = st.sampled_from(
    ["name", "kind", "base", "grid", "zip", "description", "system", "op", "size", "workload",
     "run", "endpoint", "npu.hbm_bandwidth", "endpoint.kind", "run.iterations",
     "network.dimensions[1].size", "collective.chunks", "nope"]
)  # fmt: skip
SPEC_VALUES = st.recursive(
    WEIRD_VALUES | st.sampled_from(["run", "collective", "ace-isca21", "baseline", "64 MiB"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SPEC_KEYS, inner, max_size=3),
    max_leaves=8,
)


@FUZZ
@given(st.dictionaries(SPEC_KEYS, SPEC_VALUES, max_size=5))
def test_any_sweep_spec_expands_or_is_one_error(spec: dict[str, Any]) -> None:
    try:
        points = load_spec(spec).points()
    except AcesimError as err:
        assert "\n" not in str(err)
        event(f"error: {type(err).__name__}")
        return
    event("result")
    for point in points:  # an invalid point carries its one-line error
        assert point.ok or (point.error and "\n" not in point.error), point.error


# -- command lines ---------------------------------------------------------------------------

ARGS = st.lists(
    st.sampled_from(
        [
            "--sizes",
            "1KiB",
            "1KiB:1MiB",
            "-1",
            "1e400",
            "x",
            "--op",
            "all-reduce",
            "allreduce",
            "--endpoint",
            "ace",
            "acee",
            "--system",
            "-s",
            "nope",
            "ace-isca21",
            "--exact",
            "--with-compute",
            "1e9,1e6",
            "inf,1",
            "--json",
            "--npus",
            "16",
            "6",
            "0",
            "--no-simulate",
            "--target",
            "0",
            "1.5",
            "--size",
            "--plot",
            "/nonexistent/x.png",
            "--help",
        ]
    ),  # fmt: skip
    max_size=6,
)
COMMANDS = st.sampled_from(["collective", "presets", "kinds", "assumptions", "membw", "bogus"])
runner = CliRunner()


@FUZZ
@given(COMMANDS, ARGS)
def test_any_command_line_ends_in_output_or_one_error(command: str, args: list[str]) -> None:
    if command == "membw" and "--no-simulate" not in args:
        args = [*args, "--no-simulate", "--npus", "16"]
    result = runner.invoke(app, [command, *args])
    error = result.exception
    assert error is None or isinstance(error, SystemExit | AcesimError), repr(error)
    if isinstance(error, AcesimError):
        assert "\n" not in str(error)
    assert "Traceback" not in result.output


def test_every_fuzzed_value_kind_is_generated() -> None:
    # The strategies above reach NaN, infinities and huge integers (a guard against an edit that
    # silently narrows them).
    seen = {"nan": False, "inf": False, "huge": False}

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(WEIRD_VALUES)
    def probe(value: Any) -> None:
        if isinstance(value, float):
            seen["nan"] |= math.isnan(value)
            seen["inf"] |= math.isinf(value)
        if isinstance(value, int) and not isinstance(value, bool):
            seen["huge"] |= abs(value) > 2**53

    probe()
    assert all(seen.values()), seen
