"""acesim's version (one definition; the package metadata is generated from pyproject.toml)."""

__version__ = "0.1.0"
