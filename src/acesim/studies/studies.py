"""The studies ``acesim reproduce NAME`` runs: one registry of their names.

* ``ace-isca21``: the ACE paper's evaluation regenerated (:mod:`.reproduce`; with its
  sensitivity study, :mod:`.sensitivity`), on a system with a ``[reproduction]`` table;
* ``ace-2026``: the paper's question for today's systems, LLM training with hybrid parallelism
  on H100/B200 clusters with every substrate (:mod:`.ace2026`).

Each study names the command-line options it takes besides the common ones (``--out``,
``--workers``, ``--dask``, ``--no-figures``); the command refuses the others by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..registry import Registry

__all__ = ["Study", "STUDIES"]


@dataclass(frozen=True)
class Study:
    """A registered study: its name, a one-line summary and the options it takes."""

    name: str
    summary: str
    options: frozenset[str]


#: The studies, by name (``acesim reproduce NAME``).
STUDIES: Registry[Study] = Registry("study", "paper")

for _study in (
    Study(
        "ace-isca21",
        "the ACE paper (ISCA 2021) reproduced: headline figures, simulated HBM saving, "
        "sensitivity ranges",
        frozenset(
            {
                "--system",
                "--workloads",
                "--npus",
                "--sensitivity",
                "--no-sensitivity",
                "--assumptions",
                "--set",
                "--force",
            }
        ),
    ),
    Study(
        "ace-2026",
        "the paper's question on H100/B200 clusters: LLM training with the sm, copy_engine, "
        "nvls, ace and ideal substrates",
        frozenset({"--systems", "--cases", "--endpoints"}),
    ),
):
    STUDIES.register(_study.name, _study)
