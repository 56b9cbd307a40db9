"""Bad input gets a one-line error naming the field; the messages are pinned here."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from systems import dim, make_system

from acesim import load_system, preset_names, simulate_collective
from acesim.config import system_from_dict
from acesim.config.presets import preset_document
from acesim.config.resolve import derive
from acesim.errors import AcesimError, ConfigError, TopologyError, UnitError
from acesim.units import parse_size_range


def _doc() -> dict[str, Any]:
    return {
        "name": "t",
        "network": {
            "dimensions": [
                {"kind": "ring", "size": 4, "link_bandwidth": "25 GB/s", "links_per_npu": 2},
                {"kind": "switch", "size": 2, "link_bandwidth": "50 GB/s"},
            ]
        },
    }


def _error(mutate: Any, origin: str = "") -> ConfigError:
    doc = _doc()
    mutate(doc)
    with pytest.raises(ConfigError) as info:
        system_from_dict(doc, origin=origin)
    message = str(info.value)
    assert "\n" not in message, message
    return info.value


def test_valid_document_loads() -> None:
    system = system_from_dict(_doc())
    assert system.network.total_npus == 8
    assert system.network.dimensions[0].link_bandwidth == 25e9


def test_unknown_key_is_named_with_a_did_you_mean() -> None:
    err = _error(lambda d: d["network"]["dimensions"][0].update(link_bandwith="25 GB/s"))
    assert str(err) == (
        "network.dimensions[0].link_bandwith: unknown key (did you mean 'link_bandwidth'?)"
    )
    assert err.field == "network.dimensions[0].link_bandwith"


def test_unknown_top_level_key_is_named_with_a_did_you_mean() -> None:
    assert str(_error(lambda d: d.update(colective={}))) == (
        "colective: unknown key (did you mean 'collective'?)"
    )


def test_unknown_key_without_a_close_match_lists_the_known_keys() -> None:
    err = _error(lambda d: d["network"].update(zzz=1))
    assert str(err) == "network.zzz: unknown key (known keys: dimensions, npus)"


def test_wrong_unit_is_a_unit_error_with_the_full_field_path() -> None:
    err = _error(lambda d: d["network"]["dimensions"][1].update(link_bandwidth="50 GB"))
    assert isinstance(err, UnitError)
    assert str(err) == (
        "network.dimensions[1].link_bandwidth: unknown rate unit 'GB'; "
        "use one like '25 GB/s', '1.6 TB/s', '400 Gb/s', got '50 GB'"
    )
    assert err.field == "network.dimensions[1].link_bandwidth"


def test_wrong_unit_in_a_file_names_the_file_and_the_field(tmp_path: Path) -> None:
    doc = _doc()
    doc["collective"] = {"endpoint_delay": "3 parsecs"}
    path = tmp_path / "sys.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UnitError) as info:
        load_system(path)
    assert str(info.value) == (
        f"{path}: collective.endpoint_delay: unknown time unit 'parsecs'; "
        "use one like '500 ns', '1.5 us', '2 ms', got '3 parsecs'"
    )


def test_npus_differing_from_the_product_of_sizes() -> None:
    err = _error(lambda d: d["network"].update(npus=16))
    assert str(err) == "network.npus: must equal the product of dimension sizes 4x2 = 8, got 16"


@pytest.mark.parametrize("zero", ["0 GB/s", 0, 0.0])
def test_zero_bandwidth(zero: object) -> None:
    err = _error(lambda d: d["network"]["dimensions"][0].update(link_bandwidth=zero))
    assert str(err) == "network.dimensions[0].link_bandwidth: must be positive, got 0 B/s"


def test_no_dimensions() -> None:
    err = _error(lambda d: d["network"].update(dimensions=[]))
    assert str(err) == "network.dimensions: must list at least one dimension"


def test_missing_network() -> None:
    assert str(_error(lambda d: d.pop("network"))) == "network: field required"


def test_negative_dimension_size() -> None:
    err = _error(lambda d: d["network"]["dimensions"][1].update(size=-4))
    assert str(err) == "network.dimensions[1].size: must be at least 1, got -4"


def test_negative_latency() -> None:
    err = _error(lambda d: d["network"]["dimensions"][0].update(link_latency="-5 ns"))
    assert str(err) == "network.dimensions[0].link_latency: must not be negative, got -5e-09 s"


def test_unknown_dimension_kind() -> None:
    err = _error(lambda d: d["network"]["dimensions"][0].update(kind="torus"))
    assert str(err) == (
        "network.dimensions[0].kind: input should be 'ring', 'fully_connected' or 'switch', "
        "got 'torus'"
    )


def test_unknown_algorithm_names_the_operation() -> None:
    err = _error(lambda d: d.update(collective={"algorithms": {"all-reduce": "magic"}}))
    assert str(err) == (
        "collective.algorithms.all-reduce: must be one of ring, direct, "
        "halving_doubling, double_binary_tree, nvls, flat_ring, collnet, nvls_tree, p2p, "
        "got 'magic'"
    )
    err = _error(lambda d: d.update(collective={"algorithms": {"all-reduce": ["ring", "x"]}}))
    assert str(err).startswith("collective.algorithms.all-reduce[1]: must be one of ring,")
    err = _error(lambda d: d.update(collective={"algorithms": {"allreduce": "ring"}}))
    assert str(err) == (
        "collective.algorithms.allreduce: unknown collective operation; must be one of "
        "all-reduce, reduce-scatter, all-gather, all-to-all, broadcast, reduce, sendrecv "
        "(did you mean 'all-reduce'?)"
    )


def test_comm_units_must_leave_compute_units_for_compute() -> None:
    def mutate(d: dict[str, Any]) -> None:
        d["npu"] = {"compute_units": 108}
        d["endpoint"] = {"kind": "baseline", "baseline": {"comm_units": 108}}

    err = _error(mutate, origin="dgx.toml")
    assert str(err) == (
        "dgx.toml: endpoint.baseline.comm_units: must be fewer than npu.compute_units (108), "
        "got 108"
    )
    assert err.field == "endpoint.baseline.comm_units"


def test_protocol_efficiency_out_of_range() -> None:
    err = _error(lambda d: d.update(collective={"protocol_efficiency": 1.5}))
    assert str(err) == "collective.protocol_efficiency: must be in (0, 1], got 1.5"


def test_a_derived_system_is_validated_as_a_file_is() -> None:
    # the same one-line error, naming the field, as the document loaded with that value
    system = system_from_dict(_doc())
    with pytest.raises(ConfigError) as info:
        derive(system, {"collective.protocol_efficiency": 1.5})
    assert str(info.value) == "collective.protocol_efficiency: must be in (0, 1], got 1.5"
    # and rules across fields are checked again (endpoint settings against the NPU)
    with pytest.raises(ConfigError) as info:
        derive(system, {"endpoint.kind": "baseline", "endpoint.baseline.comm_units": 108})
    assert str(info.value) == (
        "endpoint.baseline.comm_units: must be fewer than npu.compute_units (108), got 108"
    )


def test_negative_collective_size() -> None:
    with pytest.raises(ConfigError) as info:
        simulate_collective("a100-nvswitch-8", "all-reduce", "-1 MiB")
    assert str(info.value) == "size: must not be negative, got '-1 MiB'"


def test_negative_size_in_a_sweep() -> None:
    with pytest.raises(UnitError) as info:
        parse_size_range("-1KiB", "--sizes")
    assert str(info.value) == "--sizes: sizes must be positive, got '-1KiB'"


def test_unknown_collective_operation() -> None:
    with pytest.raises(ConfigError) as info:
        simulate_collective("a100-nvswitch-8", "allreduce", 1024)
    assert str(info.value) == (
        "op: must be one of all-reduce, reduce-scatter, all-gather, all-to-all, broadcast, "
        "reduce, sendrecv, got 'allreduce' (did you mean 'all-reduce'?)"
    )


def test_unknown_preset_suggests_the_closest() -> None:
    with pytest.raises(ConfigError) as info:
        load_system("a100-nvswich-8")
    assert str(info.value) == (
        "system: unknown preset, got 'a100-nvswich-8' (did you mean 'a100-nvswitch-8'?)"
    )
    with pytest.raises(ConfigError, match=r"unknown preset, got 'nope' \(see `acesim presets`\)"):
        load_system("nope")


def test_algorithm_that_cannot_run_on_its_dimension_is_a_topology_error() -> None:
    system = make_system([dim("ring", 8)], algorithms={"all-reduce": "direct"})
    with pytest.raises(TopologyError) as info:
        simulate_collective(system, "all-reduce", 1024)
    assert str(info.value) == (
        "collective.algorithms.all-reduce: algorithm 'direct' needs a fully_connected or switch "
        "dimension, got a ring of 8"
    )


def test_algorithm_list_of_the_wrong_length_is_a_topology_error() -> None:
    system = make_system([dim("ring", 8)], algorithms={"all-reduce": ["ring", "ring"]})
    with pytest.raises(TopologyError, match=r"must name one algorithm per dimension \(1\), got 2"):
        simulate_collective(system, "all-reduce", 1024)


# -- files ----------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".toml", ".yaml", ".yml", ".json"])
def test_toml_yaml_and_json_files_load_the_same_system(tmp_path: Path, suffix: str) -> None:
    doc = copy.deepcopy(preset_document("a100-nvswitch-8"))
    path = tmp_path / f"system{suffix}"
    if suffix == ".toml":
        from importlib import resources

        path.write_text(
            resources.files("acesim.config")
            .joinpath("presets/a100-nvswitch-8.toml")
            .read_text(encoding="utf-8")
        )
    elif suffix == ".json":
        path.write_text(json.dumps(doc))
    else:
        path.write_text(yaml.safe_dump(doc))
    assert load_system(path) == load_system("a100-nvswitch-8")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("s.txt", "x", "file must end in .toml, .yaml, .yml or .json"),
        ("bad.toml", "[network\n", "cannot parse: "),
        ("bad.yaml", "a: [\n", "cannot parse: "),
        ("bad.json", "{", "cannot parse: "),
        ("list.yaml", "- 1\n", "top level must be a table/mapping"),
    ],
)
def test_unreadable_files_are_config_errors_naming_the_file(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_system(path)
    assert str(info.value).startswith(f"{path}: {message}")
    assert "\n" not in str(info.value)


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match=r"^/nonexistent/s\.toml: file does not exist$"):
        load_system("/nonexistent/s.toml")


@pytest.mark.parametrize("name", preset_names())
def test_every_shipped_preset_loads_and_elaborates(name: str) -> None:
    system = load_system(name)
    assert system.name == name
    assert simulate_collective(system, "all-reduce", 1 << 20).time > 0


def test_every_error_class_is_an_acesim_error() -> None:
    for cls in (ConfigError, UnitError, TopologyError):
        assert issubclass(cls, AcesimError)
