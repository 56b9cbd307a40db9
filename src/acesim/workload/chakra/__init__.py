"""Chakra execution traces in and out (the workload format of ASTRA-sim 2.0).

- :func:`read_chakra` reads ``<prefix>.<rank>.et`` files into an execution
  :class:`~acesim.workload.graph.Graph`;
- :func:`write_chakra` writes a Graph as such files, and :func:`export_chakra` adds a summary.

The schema (:mod:`.schema`) is MLCommons Chakra's ``et_def.proto`` with the same field numbers,
built at import time from the ``protobuf`` runtime alone (no Chakra, no protoc). See
docs/chakra.md for the node and attribute mapping and what is skipped.
"""

from .reader import ChakraWarning, rank_files, read_chakra
from .writer import CHAKRA_VERSION, ChakraExport, export_chakra, write_chakra

__all__ = [
    "read_chakra",
    "write_chakra",
    "export_chakra",
    "rank_files",
    "ChakraExport",
    "ChakraWarning",
    "CHAKRA_VERSION",
]
