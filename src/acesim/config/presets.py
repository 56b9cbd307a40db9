"""Loading system documents: shipped presets (package data) and user files (TOML/YAML/JSON)."""

from __future__ import annotations

import difflib
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import tomllib
import yaml
from pydantic import ValidationError

from ..errors import ConfigError
from .errors import config_error_from
from .system import SystemConfig

DEFAULT_PRESET = "ace-isca21"


def _preset_dir() -> Any:
    return resources.files("acesim.config").joinpath("presets")


def preset_names() -> list[str]:
    """Names of the presets shipped with acesim, sorted."""
    return sorted(
        p.name[: -len(".toml")] for p in _preset_dir().iterdir() if p.name.endswith(".toml")
    )


def read_document(path: Path) -> dict[str, Any]:
    """Parse a TOML, YAML or JSON file into a dict (errors name the file)."""
    if not path.exists():
        raise ConfigError(str(path), "file does not exist")
    text = path.read_text(encoding="utf-8")
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            raise ConfigError(str(path), "file must end in .toml, .yaml, .yml or .json")
    except (ValueError, yaml.YAMLError) as exc:
        # TOMLDecodeError and JSONDecodeError are ValueErrors; so is the refusal of every parser
        # to read an integer of more than sys.get_int_max_str_digits() digits.
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "integer string conversion" in first:
            first = f"an integer has more than {sys.get_int_max_str_digits()} digits"
        raise ConfigError(str(path), f"cannot parse: {first}") from None
    if not isinstance(data, dict):
        raise ConfigError(str(path), "top level must be a table/mapping")
    return data


def preset_document(name: str) -> dict[str, Any]:
    """The raw document of a shipped preset."""
    names = preset_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean {close[0]!r}?" if close else "see `acesim presets`"
        raise ConfigError("system", "unknown preset", name, hint=hint)
    text = _preset_dir().joinpath(name + ".toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def system_from_dict(data: dict[str, Any], origin: str = "") -> SystemConfig:
    """Validate a system document; errors are :class:`ConfigError` naming the field."""
    try:
        return SystemConfig.model_validate(data)
    except ValidationError as exc:
        err = config_error_from(exc, SystemConfig)
        if origin:
            err.args = (f"{origin}: {err.args[0]}",)
        raise err from None


def system_document(name_or_path: str | Path) -> dict[str, Any]:
    """The raw document for a preset name or a file path."""
    text = str(name_or_path)
    path = Path(text)
    if path.suffix.lower() in (".toml", ".yaml", ".yml", ".json") or path.exists():
        return read_document(path)
    return preset_document(text)


def load_system(name_or_path: str | Path = DEFAULT_PRESET) -> SystemConfig:
    """A validated :class:`SystemConfig` from a preset name or a TOML/YAML/JSON file."""
    text = str(name_or_path)
    return system_from_dict(system_document(text), origin=text)


def assumptions(system: SystemConfig) -> list[tuple[str, str, str]]:
    """(field, kind, note) for every sourced parameter, assumptions first."""
    rows = [(f, s.kind, s.note) for f, s in system.sources.items()]
    return sorted(rows, key=lambda r: (r[1] != "assumption", r[0]))
