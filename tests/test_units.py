"""Units are parsed once, to SI base units; bad units are config errors naming the field."""

from __future__ import annotations

import pytest

from acesim.errors import ConfigError, UnitError
from acesim.units import format_rate, format_size, format_time, parse_quantity, parse_size_range


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("900 GB/s", "rate", 9e11),
        ("25 GB/s", "rate", 25e9),
        ("1.6 TB/s", "rate", 1.6e12),
        ("10 GiB/s", "rate", 10 * 2**30),
        ("4 MiB", "size", 4 * 2**20),
        ("4 MB", "size", 4e6),
        ("1 GiB", "size", 2**30),
        ("1 GB", "size", 1e9),
        ("512 B", "size", 512),
        ("1KiB", "size", 1024),
        ("500 ns", "time", 500e-9),
        ("1.5 us", "time", 1.5e-6),
        ("1.5 µs", "time", 1.5e-6),
        ("2 ms", "time", 2e-3),
        ("1.2 TFLOP/s", "flop_rate", 1.2e12),
        ("19.5 TFLOPS", "flop_rate", 19.5e12),
        ("4.1 GFLOP", "flops", 4.1e9),
    ],
)
def test_quantity_text_parses_to_si_base_units(text: str, kind: str, expected: float) -> None:
    assert parse_quantity(text, kind, "f") == pytest.approx(expected, rel=1e-15)  # type: ignore[arg-type]


def test_binary_and_decimal_size_prefixes_are_distinct() -> None:
    assert parse_quantity("4 MiB", "size") == 4_194_304
    assert parse_quantity("4 MB", "size") == 4_000_000


def test_plain_numbers_are_taken_in_base_units() -> None:
    assert parse_quantity(1e9, "rate") == 1e9
    assert parse_quantity(7, "size") == 7.0
    assert parse_quantity("3e-6", "time") == 3e-6


@pytest.mark.parametrize(
    ("value", "kind", "fragment"),
    [
        ("25 GB/z", "rate", "unknown rate unit 'GB/z'"),
        ("25 GB", "rate", "unknown rate unit 'GB'"),  # a size where a rate is expected
        ("4 MiB/s", "size", "unknown size unit 'MiB/s'"),  # a rate where a size is expected
        ("3 parsecs", "time", "unknown time unit 'parsecs'"),
        ("1.2 TiFLOP/s", "flop_rate", "unknown flop_rate unit"),  # no binary prefixes for FLOPs
        ("fast", "rate", "expected a rate such as"),
        (True, "size", "expected a size such as"),
        ([1], "size", "expected a size such as"),
        (float("nan"), "time", "must be a finite number"),
        ("1e999 B", "size", "must be a finite number"),
    ],
)
def test_bad_quantity_is_a_unit_error_naming_the_field(
    value: object, kind: str, fragment: str
) -> None:
    with pytest.raises(UnitError) as info:
        parse_quantity(value, kind, "npu.hbm_bandwidth")  # type: ignore[arg-type]
    message = str(info.value)
    assert message.startswith("npu.hbm_bandwidth: ")
    assert fragment in message
    assert "\n" not in message
    assert info.value.field == "npu.hbm_bandwidth"
    assert isinstance(info.value, ConfigError)


def test_size_range_steps_by_powers_of_two_including_both_bounds() -> None:
    assert parse_size_range("1KiB:1MiB") == [2**k for k in range(10, 21)]


def test_size_range_with_explicit_factor() -> None:
    assert parse_size_range("1KiB:1MiB:x4") == [2**10, 2**12, 2**14, 2**16, 2**18, 2**20]


def test_size_list_and_single_size() -> None:
    assert parse_size_range("1MiB, 8MiB") == [2**20, 8 * 2**20]
    assert parse_size_range("64MiB") == [64 * 2**20]


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("-1KiB", "sizes must be positive"),
        ("0:1MiB", "sizes must be positive"),
        ("1MiB:1KiB", "MAX must not be below MIN"),
        ("1KiB:1MiB:x1", "step factor must be above 1"),
        ("1KiB:1MiB:xfoo", "step must look like x2 or x4"),
        ("1:2:3:4", "expected MIN:MAX or MIN:MAX:xFACTOR"),
        ("1 KiB/s", "unknown size unit"),
    ],
)
def test_bad_size_range_names_the_option(text: str, rule: str) -> None:
    with pytest.raises(UnitError) as info:
        parse_size_range(text, "--sizes")
    assert str(info.value).startswith("--sizes: ")
    assert rule in str(info.value)


def test_formatting_uses_the_documented_prefixes() -> None:
    assert format_size(64 * 2**20) == "64 MiB"
    assert format_rate(231e9) == "231 GB/s"
    assert format_time(12.3e-6) == "12.3 us"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("400 Gb/s", 50e9),
        ("400 Gbit/s", 50e9),
        ("400 Gbps", 50e9),
        ("800 Mb/s", 100e6),
        ("1 Tb/s", 125e9),
        ("25 GBps", 25e9),
    ],
)
def test_bit_rates_are_bytes_over_eight(text: str, expected: float) -> None:
    assert parse_quantity(text, "rate") == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("text", ["1.5 us", "1.5 \u00b5s", "1.5 \u03bcs"])
def test_both_micro_signs_are_microseconds(text: str) -> None:
    assert parse_quantity(text, "time") == pytest.approx(1.5e-6, rel=1e-15)


@pytest.mark.parametrize(
    "seconds,text",
    [
        (999.0, "999 s"),
        (1000.0, "16.7 min"),
        (3.41e5, "94.7 h"),
        (1.08e6, "300 h"),
        (4e6, "1,111 h"),
    ],
)
def test_long_durations_print_in_minutes_or_hours_never_with_prefixes(
    seconds: float, text: str
) -> None:
    from acesim.units import column_scale, format_eng

    assert format_time(seconds) == text
    assert format_eng(seconds, "s") == text
    assert column_scale([seconds], "s")[1] in ("s", "min", "h")
    assert "ks" not in text and "Ms" not in text
