"""Every numeric configuration field: finite numbers only, one-line errors naming the field, the
rule and the value (acesim.config.validators), the unit parser's finiteness, unique dimension
names, the NPU-count bound."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from systems import examples

from acesim.config import load_system, system_from_dict
from acesim.config.endpoint import EndpointConfig
from acesim.config.errors import config_error_from
from acesim.config.experiment import WorkloadConfig
from acesim.config.resolve import resolve_system
from acesim.config.system import DEFAULT_DIMENSION_NAMES, dimension_name
from acesim.config.validators import (
    MAX_COUNT,
    MAX_DIMENSION_SIZE,
    MAX_NPUS,
    all_of,
    at_least,
    at_most,
    finite,
    in_range,
    non_negative,
    positive,
)
from acesim.errors import ConfigError, UnitError, short_repr
from acesim.network.topology import Topology
from acesim.runs.case import run_options
from acesim.units import parse_quantity

NAN, INF = float("nan"), float("inf")
HUGE = 10**5000  # an int Python will not even print (more than 4300 digits)
BUILTIN_KINDS = ("baseline", "ace", "ideal")
EXAMPLES = {
    "size": "'4 MiB', '1 GB', '512 B'",
    "rate": "'25 GB/s', '1.6 TB/s', '400 Gb/s'",
    "time": "'500 ns', '1.5 us', '2 ms'",
    "flop_rate": "'125 TFLOP/s', '19.5 TFLOPS'",
    "power": "'700 W', '1.2 kW', '500 mW'",
    "energy_per_byte": "'24 pJ/B', '3.9 pJ/bit'",
    "energy_per_flop": "'0.33 pJ/FLOP', '1e-12'",
}
#: a text of the unit kind whose number is finite but whose value in base units overflows
OVERFLOW = {
    "size": "1e308 TB",
    "rate": "1e308 TB/s",
    "time": "1e307 min",
    "flop_rate": "1e308 TFLOPS",
    "power": "1e308 kW",
    "energy_per_byte": "1e308 kJ/bit",
    "energy_per_flop": "1e308 kJ/FLOP",
}


def _id(value: object) -> str:
    """A test id for any value (pytest's own would print a 5000-digit integer and fail)."""
    return short_repr(value)[:30]


def _non_finite(extra: list[tuple[Any, str]]) -> list[tuple[Any, str]]:
    """What every numeric rule answers for nan, +/-inf (as floats and as text)."""
    return [
        (NAN, "must be a finite number, got nan"),
        (INF, "must be a finite number, got inf"),
        (-INF, "must be a finite number, got -inf"),
        ("1e999", "must be a finite number, got '1e999'"),
        *extra,
    ]


def _count(rule: str, low: int, high: int) -> list[tuple[Any, str]]:
    bad = [(low - 1, f"{rule}, got {low - 1}")] + ([(-1, f"{rule}, got -1")] if low > 0 else [])
    return _non_finite(
        [
            *bad,
            (True, "must be a whole number, got True"),
            (1.5, "input should be a valid integer, got a number with a fractional part, got 1.5"),
            (high + 1, f"must be at most {high}, got {high + 1}"),
            (HUGE, f"must be at most {high}, got <integer of about 5001 digits>"),
        ]
    )


def _quantity(kind: str, unit: str, rule: str, zero_ok: bool) -> list[tuple[Any, str]]:
    return _non_finite(
        [
            (-1, f"{rule}, got -1 {unit}"),
            *([] if zero_ok else [(0, f"{rule}, got 0 {unit}")]),
            (True, f"expected a {kind} such as {EXAMPLES[kind]}, got True"),
            (OVERFLOW[kind], f"must be a finite number, got {OVERFLOW[kind]!r}"),
            (HUGE, "must be a finite number, got <integer of about 5001 digits>"),
            ("nan", f"expected a {kind} such as {EXAMPLES[kind]}, got 'nan'"),
        ]
    )


def _plain(rule: str, bad: dict[float, str]) -> list[tuple[Any, str]]:
    return _non_finite(
        [
            *((v, f"{rule}, got {text}") for v, text in bad.items()),
            (True, "must be a number, got True"),
            (HUGE, "input should be a valid number, got <integer of about 5001 digits>"),
            ("nan", "must be a finite number, got 'nan'"),
        ]
    )


RULES: dict[str, list[tuple[Any, str]]] = {
    "count": _count("must be at least 1", 1, MAX_COUNT),
    "count0": _count("must not be negative", 0, MAX_COUNT),
    "npus": _count("must be at least 1", 1, MAX_NPUS),
    "dimension_size": _count("must be at least 1", 1, MAX_DIMENSION_SIZE),
    "size": _quantity("size", "B", "must be positive", zero_ok=False),
    "rate": _quantity("rate", "B/s", "must be positive", zero_ok=False),
    "flop_rate": _quantity("flop_rate", "FLOP/s", "must be positive", zero_ok=False),
    "time0": _quantity("time", "s", "must not be negative", zero_ok=True),
    "watts": _quantity("power", "W", "must be positive", zero_ok=False),
    "watts0": _quantity("power", "W", "must not be negative", zero_ok=True),
    "per_byte": _quantity("energy_per_byte", "J/B", "must not be negative", zero_ok=True),
    "per_flop": _quantity("energy_per_flop", "J/FLOP", "must not be negative", zero_ok=True),
    "positive": _plain("must be positive", {-1: "-1", 0: "0"}),
    "non_negative": _plain("must not be negative", {-1: "-1", -1e-300: "-1e-300"}),
    "efficiency": _plain("must be in (0, 1]", {-1: "-1", 0: "0", 1.5: "1.5"}),
    "share": _plain("must be in (0, 1)", {-1: "-1", 0: "0", 1: "1", 1.0000001: "1.0000001"}),
    "at_least_one": _plain("must be at least 1", {0.5: "0.5", 0: "0", -1: "-1"}),
}

#: every numeric field of the system document (ace-isca21, built-in endpoint kinds) -> its rule
SYSTEM_FIELDS: dict[str, str] = {
    "npu.compute_units": "count",
    "npu.matrix_flops.fp16": "flop_rate",
    "npu.matrix_flops.fp32": "flop_rate",
    "npu.matrix_flops.fp64": "flop_rate",
    "npu.vector_flops": "flop_rate",
    "npu.kernels.gemm_efficiency.fp16": "efficiency",
    "npu.kernels.gemm_efficiency.fp32": "efficiency",
    "npu.kernels.attention_efficiency": "efficiency",
    "npu.kernels.attention_backward_efficiency": "efficiency",
    "npu.kernels.attention_block_overhead": "non_negative",
    "npu.kernels.attention_backward_block_overhead": "non_negative",
    "npu.kernels.hbm_efficiency": "efficiency",
    "npu.kernels.write_penalty": "non_negative",
    "npu.kernels.latency": "time0",
    "npu.kernels.unit_hbm_bandwidth": "rate",
    "npu.hbm_bandwidth": "rate",
    "npu.hbm_capacity": "size",
    "npu.host_link_bandwidth": "rate",
    "npu.host_memory_bandwidth": "rate",
    "host.op_time": "time0",
    "host.ops_per_launch": "non_negative",
    "npu.power.tdp": "watts",
    "npu.power.idle": "watts0",
    "npu.power.unit_active": "watts0",
    "npu.power.matrix_flop_energy.fp16": "per_flop",
    "npu.power.matrix_flop_energy.fp32": "per_flop",
    "npu.power.matrix_flop_energy.fp64": "per_flop",
    "npu.power.vector_flop_energy": "per_flop",
    **{
        f"npu.power.{name}": "per_byte"
        for name in (
            "hbm_energy",
            "copy_engine_energy",
            "host_link_energy",
            "ace_sram_energy",
            "ace_alu_energy",
        )
    },
    "npu.power.ace_static": "watts0",
    **{
        f"network.dimensions[{i}].{name}": rule
        for i in range(3)
        for name, rule in (
            ("size", "dimension_size"),
            ("link_bandwidth", "rate"),
            ("link_latency", "time0"),
            ("links_per_npu", "count"),
            ("npus_per_link", "count"),
            ("oversubscription", "at_least_one"),
            ("leaf_size", "count"),
            ("power.link_energy", "per_byte"),
            ("power.switch_static", "watts0"),
            ("power.switch_energy", "per_byte"),
            ("power.nic_static", "watts0"),
            ("power.nic_energy", "per_byte"),
            ("nic_efficiency", "efficiency"),
            ("pcie_bandwidth", "rate"),
            ("pcie_efficiency", "efficiency"),
            ("ports_per_nic", "count"),
            ("net_overhead", "time0"),
        )
    },
    "network.npus": "npus",
    "collective.chunks": "count",
    "collective.max_messages": "count",
    "collective.active_chunks_per_dimension": "count",
    "collective.endpoint_delay": "time0",
    "collective.protocol_efficiency": "efficiency",
    "collective.nvls_efficiency": "efficiency",
    "collective.nvls_delay": "time0",
    "collective.nvls_chunk_bytes": "size",
    "collective.chain_piece_bytes": "size",
    "network.dimensions[0].efficiency": "efficiency",
    "network.dimensions[0].incast_efficiency": "efficiency",
    "network.dimensions[0].incast_fan_in": "count",
    "collective.nvls_loop_latency": "time0",
    "collective.nvls_channels": "count",
    "collective.nvls_stages": "count",
    "endpoint.baseline.comm_units": "count",
    "endpoint.baseline.nvls_units": "count",
    "endpoint.baseline.nvls_reduce_hbm_bytes_per_byte": "non_negative",
    "endpoint.baseline.nvls_gather_hbm_bytes_per_byte": "non_negative",
    "endpoint.baseline.unit_bandwidth": "rate",
    "endpoint.baseline.unit_hbm_bandwidth": "rate",
    "endpoint.baseline.hbm_share": "share",
    "endpoint.baseline.hbm_weight": "positive",
    "endpoint.baseline.reduce_hbm_bytes_per_byte": "positive",
    "endpoint.baseline.gather_hbm_bytes_per_byte": "positive",
    "endpoint.baseline.alltoall_hbm_bytes_per_byte": "positive",
    "endpoint.baseline.reduction_flops_per_byte": "non_negative",
    **{
        f"endpoint.baseline.splits[{i}].{name}": rule
        for i in range(5)
        for name, rule in (
            ("comm_units", "count"),
            ("hbm_share", "share"),
            ("hbm_weight", "positive"),
        )
    },
    "endpoint.ace.sram": "size",
    "endpoint.ace.alu_bandwidth": "rate",
    "endpoint.ace.dma_bandwidth": "rate",
    "endpoint.ace.spill_hbm_bytes_per_byte": "non_negative",
    "endpoint.ace.buffers_per_phase": "count",
    "endpoint.ideal.max_chunk_bytes": "size",
    "reproduction.npus[0]": "npus",
    "reproduction.npus[3]": "npus",
    "reproduction.iterations": "count",
    "reproduction.sram_sizes[0]": "size",
    "reproduction.sram_sizes[5]": "size",
    "reproduction.membw_size": "size",
    **{
        f"reproduction.workloads.{w}.{name}": "count"
        for w in ("resnet50", "gnmt", "dlrm")
        for name in ("batch_per_npu",)  # (precision is a name, checked in test_zoo/test_house)
    },
}

#: every numeric field of the run options and of the workload table -> its rule
RUN_FIELDS: dict[str, str] = {
    "run.iterations": "count",
    "run.max_messages": "count",
    "run.max_micro_batches": "count",
    "run.warmup": "count0",
    "run.bucket_size": "size",
    "run.shape[0]": "npus",
    "run.npus": "npus",
    "run.nodes": "npus",
    "workload.batch_per_npu": "count",
}


def _table(fields: dict[str, str]) -> list[Any]:
    return [
        pytest.param(path, value, message, id=f"{path}={short_repr(value)[:20]}")
        for path, rule in fields.items()
        for value, message in RULES[rule]
    ]


def _system_error(overrides: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        resolve_system("ace-isca21", overrides=overrides)
    message = str(info.value)
    assert "\n" not in message, message
    return info.value


@pytest.mark.parametrize(("path", "value", "message"), _table(SYSTEM_FIELDS))
def test_a_bad_number_in_the_system_document_is_one_line_naming_field_rule_and_value(
    path: str, value: Any, message: str
) -> None:
    err = _system_error({path: value})
    assert str(err) == f"ace-isca21: {path}: {message}"
    assert err.field == path


def _run_error(path: str, value: Any) -> ConfigError:
    table, _, name = path.partition(".")
    if name == "shape[0]":
        name, value = "shape", [value, 4, 4]
    if table == "run":
        with pytest.raises(ConfigError) as info:
            run_options({name: value})
        return info.value
    try:
        WorkloadConfig.model_validate({name: value})
    except ValidationError as exc:
        return config_error_from(exc, WorkloadConfig, "workload")
    raise AssertionError(f"{path} = {value!r} was accepted")


@pytest.mark.parametrize(("path", "value", "message"), _table(RUN_FIELDS))
def test_a_bad_number_in_the_run_options_is_one_line_naming_field_rule_and_value(
    path: str, value: Any, message: str
) -> None:
    err = _run_error(path, value)
    assert str(err) == f"{path}: {message}"
    assert "\n" not in str(err)


# -- the tables cover every numeric field ------------------------------------------------------


def _is_number(annotation: Any) -> bool:
    if annotation is bool:
        return False
    if annotation in (int, float):
        return True
    return any(_is_number(arg) for arg in get_args(annotation))


def _numeric_paths(model: BaseModel, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for name, info in type(model).model_fields.items():
        value, path = getattr(model, name), f"{prefix}{name}"
        if isinstance(value, BaseModel):
            out |= _numeric_paths(value, path + ".")
        elif isinstance(value, list) and value and isinstance(value[0], BaseModel):
            for i, item in enumerate(value):
                out |= _numeric_paths(item, f"{path}[{i}].")
        elif (
            isinstance(value, dict) and value and isinstance(next(iter(value.values())), BaseModel)
        ):
            for key, item in value.items():
                out |= _numeric_paths(item, f"{path}.{key}.")
        elif isinstance(value, dict):  # a table of numbers (npu.matrix_flops)
            out |= {f"{path}.{key}" for key in value}
        elif name == "tile":  # a pair of counts, tested by test_a_tile_is_a_pair_of_counts
            continue
        elif _is_number(info.annotation):
            out.add(f"{path}[0]" if isinstance(value, list) else path)
    if isinstance(model, EndpointConfig):
        for kind in BUILTIN_KINDS:
            out |= _numeric_paths(model.settings(kind), f"{prefix}{kind}.")
    return out


def _shape(paths: set[str]) -> set[str]:
    return {re.sub(r"\[\d+\]", "[]", p) for p in paths}


def test_the_system_table_lists_every_numeric_field_of_the_document() -> None:
    assert _shape(_numeric_paths(load_system("ace-isca21"))) == _shape(set(SYSTEM_FIELDS))


def test_the_run_table_lists_every_numeric_run_option_and_workload_setting() -> None:
    found = _numeric_paths(run_options(), "run.") | _numeric_paths(
        WorkloadConfig.model_validate({}), "workload."
    )
    # run.placement is a permutation, not a number with a range: tests/test_placement.py checks
    # its rules (length, repeats, range, integers)
    found -= {"run.placement"}
    assert _shape(found) == _shape(set(RUN_FIELDS) - {"run.shape[0]"}) | {"run.shape"}


# -- what the types are for: NaN or inf used to get through ------------------------------------


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("endpoint.baseline.splits[2].hbm_weight", INF),  # made `acesim run` pick a NaN time
        ("endpoint.baseline.reduction_flops_per_byte", NAN),  # was silently taken as 0
        ("endpoint.ace.spill_hbm_bytes_per_byte", NAN),  # had no validator at all
        ("npu.hbm_bandwidth", "1e999"),  # a unit-less text skipped the finiteness check
        ("reproduction.iterations", 0),  # the reproduction table was not validated
    ],
)
def test_values_that_used_to_pass_are_refused(path: str, value: Any) -> None:
    assert _system_error({path: value}).field == path


def test_a_valid_value_still_passes_every_field() -> None:
    system = resolve_system(
        "ace-isca21",
        overrides={
            "collective.protocol_efficiency": 1,
            "endpoint.baseline.reduction_flops_per_byte": 0,
            "endpoint.ace.spill_hbm_bytes_per_byte": 0.0,
            "network.dimensions[0].link_latency": 0,
            "network.npus": 64,
            "endpoint.ideal.max_chunk_bytes": "1 MiB",
            "npu.compute_units": "80",  # pydantic's lax mode still reads a whole-number text
        },
    )
    assert system.collective.protocol_efficiency == 1.0
    assert system.npu.compute_units == 80


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "network.dimensions[0].link_bandwidth",
            1e308,
            "times links_per_npu (2) must be a finite B/s, got 1e+308 B/s",
        ),
        (
            "npu.matrix_flops.fp16",
            1e307,
            "times compute_units (80) must be a finite FLOP/s, got 1e+307 FLOP/s",
        ),
        (
            "endpoint.baseline.unit_bandwidth",
            1e307,
            "times npu.compute_units (80) must be a finite B/s, got 1e+307 B/s",
        ),
    ],
)
def test_finite_values_whose_product_overflows_are_refused(
    path: str, value: float, message: str
) -> None:
    assert str(_system_error({path: value})) == f"ace-isca21: {path}: {message}"


# -- unique dimension names, the NPU-count bound -----------------------------------------------


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            ("x", "x", None),
            "network.dimensions[1].name: must be unique, 'x' is also dimensions[0]'s name",
        ),
        (
            (None, "local", None),
            "network.dimensions[1].name: must be unique, 'local' is also dimensions[0]'s name "
            "(its default)",
        ),
        (
            ("horizontal", None, None),
            "network.dimensions[0].name: must be unique, 'horizontal' is also dimensions[2]'s "
            "name (its default)",
        ),
        (
            ("dim4", None, None, None, None),
            "network.dimensions[0].name: must be unique, 'dim4' is also dimensions[4]'s name "
            "(its default)",
        ),
    ],
)
def test_dimension_names_must_be_unique_default_names_included(
    names: tuple[str | None, ...], message: str
) -> None:
    dims = [
        {"kind": "ring", "size": 2, "link_bandwidth": 1e9, **({"name": n} if n else {})}
        for n in names
    ]
    with pytest.raises(ConfigError) as info:
        system_from_dict({"network": {"dimensions": dims}})
    assert str(info.value) == message


def test_a_dimension_may_be_named_its_own_default() -> None:
    dims = [{"kind": "ring", "size": 2, "link_bandwidth": 1e9, "name": "local"}] + [
        {"kind": "ring", "size": 2, "link_bandwidth": 1e9} for _ in range(4)
    ]
    dims[3]["name"] = "dim3"
    assert len(system_from_dict({"network": {"dimensions": dims}}).network.dimensions) == 5


def test_the_default_names_are_the_topologys() -> None:
    system = system_from_dict(
        {"network": {"dimensions": [{"size": 2, "link_bandwidth": 1e9} for _ in range(5)]}}
    )
    names = [d.name for d in Topology(system.network, system.collective).dimensions]
    assert names == [dimension_name(i) for i in range(5)]
    assert tuple(names[:3]) == DEFAULT_DIMENSION_NAMES


def test_the_network_holds_at_most_2_to_the_32_npus() -> None:
    err = _system_error(
        {f"network.dimensions[{i}].size": 2**16 for i in range(2)}
        | {"network.dimensions[2].size": 2}
    )
    assert str(err) == (
        "ace-isca21: network.dimensions: must hold at most 2**32 = 4294967296 NPUs in all "
        "(the product of the sizes), got 65536x65536x2"
    )
    ok = resolve_system("ace-isca21", shape=[2**16, 2**8, 2**8])
    assert ok.network.total_npus == MAX_NPUS


def test_boolean_sizes_are_refused_everywhere() -> None:
    dims = [{"kind": "ring", "size": True, "link_bandwidth": 1e9}]
    with pytest.raises(ConfigError, match=r"^network\.dimensions\[0\]\.size: must be a whole "):
        system_from_dict({"network": {"dimensions": dims}})


# -- the unit parser ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "kind", "fragment"),
    [
        ("1e999", "size", "must be a finite number, got '1e999'"),
        ("-1e999", "time", "must be a finite number, got '-1e999'"),
        ("nan", "rate", "expected a rate such as"),
        ("inf", "rate", "expected a rate such as"),
        ("-inf GB/s", "rate", "expected a rate such as"),
        (NAN, "size", "must be a finite number, got nan"),
        (INF, "size", "must be a finite number, got inf"),
        (-INF, "flops", "must be a finite number, got -inf"),
        ("1e308 TB/s", "rate", "must be a finite number, got '1e308 TB/s'"),
        ("1e300 PiB", "size", "must be a finite number, got '1e300 PiB'"),
        (HUGE, "size", "must be a finite number, got <integer of about 5001 digits>"),
        (10**400, "size", "must be a finite number, got <integer of about 401 digits>"),
        ("9" * 5000, "size", "must be at most 200 characters long, got '99999"),
        ("9" * 400, "size", "must be at most 200 characters long"),
        ("9" * 150 + "e200", "size", "must be a finite number"),
        ("9" * 5000 + " B", "size", "must be at most 200 characters long, got '99999"),
    ],
    ids=_id,
)
def test_the_unit_parser_refuses_every_non_finite_result(
    value: object, kind: Any, fragment: str
) -> None:
    with pytest.raises(UnitError) as info:
        parse_quantity(value, kind, "f")
    message = str(info.value)
    assert message.startswith("f: ") and fragment in message and "\n" not in message
    assert len(message) < 300  # a long value is cut (errors.MAX_SHOWN_VALUE)


def test_the_unit_parser_still_reads_what_it_read() -> None:
    assert parse_quantity("1.5e3", "size") == 1500.0
    assert parse_quantity(2**60, "size") == float(2**60)
    assert parse_quantity("1e300 B", "size") == 1e300
    assert parse_quantity(" 4 MiB ", "size") == 4 * 2**20


def test_a_document_with_a_5000_digit_integer_is_one_line(tmp_path: Path) -> None:
    for suffix, text in (
        (".toml", f"[npu]\ncompute_units = {'7' * 5000}\n"),
        (".json", f'{{"npu": {{"compute_units": {"7" * 5000}}}}}'),
        (".yaml", f"npu:\n  compute_units: {'7' * 5000}\n"),
    ):
        path = tmp_path / f"big{suffix}"
        path.write_text(text)
        with pytest.raises(ConfigError) as info:
            load_system(path)
        assert str(info.value).startswith(f"{path}: cannot parse: a number is too long")


def test_deriving_an_endpoint_variant_validates_it() -> None:
    system = load_system("ace-isca21")
    with pytest.raises(ConfigError) as info:
        system.with_endpoint("baseline", hbm_weight=INF)
    assert str(info.value) == "endpoint.baseline.hbm_weight: must be a finite number, got inf"
    with pytest.raises(ConfigError) as info:
        system.with_endpoint("baseline", comm_units=80)
    assert str(info.value) == (
        "endpoint.baseline.comm_units: must be fewer than npu.compute_units (80), got 80"
    )
    with pytest.raises(ConfigError, match=r"^endpoint\.kind: must be one of"):
        system.with_endpoint("acee")


# -- the factories -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "value", "message"),
    [
        (positive("B/s"), 0.0, "must be positive, got 0 B/s"),
        (positive(), NAN, "must be a finite number, got nan"),
        (positive(), INF, "must be a finite number, got inf"),
        (non_negative("s"), -5e-9, "must not be negative, got -5e-09 s"),
        (at_least(1), -4, "must be at least 1, got -4"),
        (at_most(10), 11, "must be at most 10, got 11"),
        (at_most(10), HUGE, "must be at most 10, got <integer of about 5001 digits>"),
        (in_range(0, 1, lo_open=True), 1.5, "must be in (0, 1], got 1.5"),
        (in_range(0, 1, hi_open=True), 1.0, "must be in [0, 1), got 1"),
        (in_range(0.5, 2), 0.25, "must be in [0.5, 2], got 0.25"),
        (in_range(0, 1), 1.0000001, "must be in [0, 1], got 1.0000001"),
        (finite(), -INF, "must be a finite number, got -inf"),
        (all_of(positive(), at_most(3)), 4.0, "must be at most 3, got 4"),
        (all_of(positive(), at_most(3)), -1.0, "must be positive, got -1"),
        (positive(allow_inf=True), -INF, "must be positive, got -inf"),
        (positive(allow_inf=True), NAN, "must be a finite number, got nan"),
    ],
    ids=_id,
)
def test_a_check_states_its_rule_and_the_value(check: Any, value: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        check(value)
    assert str(info.value) == message


def test_a_check_returns_a_good_value_unchanged() -> None:
    assert positive()(2.5) == 2.5
    assert at_least(1)(3) == 3
    assert positive(allow_inf=True)(INF) == INF
    assert in_range(0, 1)(0.0) == 0.0
    assert repr(all_of(positive(), at_most(3))) == (
        "<all of: <check: must be positive>, <check: must be at most 3>>"
    )
    with pytest.raises(ValueError, match="finite bounds"):
        in_range(0, INF)


# -- property: nothing non-finite gets in ------------------------------------------------------

_NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0, max_value=8),  # plausible values, so that some systems validate
    st.integers(min_value=1, max_value=8),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1e308, -1e308, 5e-324, 10**400, "1e999", "nan", True, 2**32, 2**53]),
)


def _finite_numbers(value: Any, path: str = "") -> list[str]:
    """Paths of the non-finite numbers in a dumped document."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _finite_numbers(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _finite_numbers(v, f"{path}[{i}]")]
    if isinstance(value, float) and not math.isfinite(value):
        return [path]
    return []


@settings(max_examples=examples(150), deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(SYSTEM_FIELDS)), _NUMBERS, min_size=1, max_size=3))
def test_random_numbers_either_fail_validation_or_leave_every_number_finite(
    overrides: dict[str, Any],
) -> None:
    try:
        system = resolve_system("ace-isca21", overrides=overrides)
    except ConfigError as err:
        assert "\n" not in str(err)
        return
    assert _finite_numbers(system.model_dump()) == []
    assert math.isfinite(system.npu.peak_flops)
    for d in system.network.dimensions:
        assert math.isfinite(d.link_bandwidth * d.links_per_npu)


@pytest.mark.parametrize(
    ("tile", "message"),
    [
        ([0, 128], "npu.kernels.tile[0]: must be at least 1, got 0"),
        ([128], "npu.kernels.tile"),
        ([128, 128.5], "npu.kernels.tile[1]"),
    ],
)
def test_a_tile_is_a_pair_of_counts(tile: list[float], message: str) -> None:
    err = _system_error({"npu.kernels.tile": tile})
    assert message in str(err)


def test_an_unknown_dtype_peak_is_refused_with_the_known_names() -> None:
    err = _system_error({"npu.matrix_flops": {"fp4": 1e15}})
    assert "npu.matrix_flops.fp4: unknown dtype; must be one of fp64, fp32, tf32" in str(err)
