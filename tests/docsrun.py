"""Running the fenced commands and snippets of README.md and docs/ (tests/test_docs.py).

A fenced block in ``bash``, ``sh``, ``shell`` or ``console`` (only its ``$ `` lines) holds
``acesim`` commands, one a line (``\\`` continues a line, ``&&`` chains commands, ``#`` starts
a comment, ``| tool`` pipes the output into another program, which is not run); a ``python``
block is a script. Other languages (``toml``, ``yaml``, output) are text. A block preceded by
``<!-- docs-test: skip (reason) -->`` is not run: the reason says why (it installs the
package, builds another simulator, runs for minutes).

Commands run small: :data:`SMALL` rewrites sizes that only make a run longer (more NPUs, more
sizes, more workloads) into smaller ones of the same command, so every documented option and
file is still exercised (a ``python`` block's LLM calls likewise, :data:`SMALL_PYTHON`);
:data:`FIXTURES` are the files the docs name that a user writes
themselves (a placement). Everything runs in one scratch folder per document, blocks in order,
with the repository's ``examples/`` beside it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

SHELL = {"bash", "sh", "shell", "console"}
RUN = SHELL | {"python"}
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*\(([^)]+)\)\s*-->\s*$")

#: (pattern, replacement) applied in order to every command line: the same command at a size
#: that runs in seconds. Each says what it shrinks.
SMALL: list[tuple[str, str]] = [
    # networks: fewer NPUs or nodes (the option itself still runs)
    (r"--npus 128\b", "--npus 16"),
    (r"--npus 16,64\b", "--npus 16"),
    (r"--nodes 8\b", "--nodes 4"),
    # LLM runs: the family's smallest model, a smaller batch and sequence than a real
    # iteration, the same parallel plan (every option still runs; 4 micro-batches fill a
    # pipeline of 4 stages, and a deeper one runs with fewer micro-batches than stages)
    (r"-w llama3-70b\b", "-w llama3-8b"),
    (r"--global-batch \d+", "--global-batch 4"),
    (r"--seq \d+", "--seq 512"),
    (r"^(?!.*--seq)(acesim (?:run|export-chakra) .*--parallel .*)$", r"\1 --seq 512"),
    (r"vpp=(?:[3-9]|\d\d+)\b", "vpp=1"),
    # plans: a handful of configurations (every option still runs; tests/test_plan.py
    # searches whole spaces)
    (
        r"^acesim plan (?!.*--space)",
        "acesim plan --space tp=8 --space pp=1,2 --space vpp=1 --space cp=1 --space "
        "micro_batch=1 --space recompute=none --space zero=1 --space tp_overlap=1 ",
    ),
    (r"--space tp=1,2,4,8\b", "--space tp=8"),
    (r"--space micro_batch=1,2\b", "--space micro_batch=1"),
    (r"--space recompute=none,selective\b", "--space recompute=none"),
    # collective size sweeps: the first sizes of the range
    (r"--sizes 1KiB:1GiB\b", "--sizes 1KiB:4KiB"),
    (r"--sizes 8B:8GiB\b", "--sizes 8B:64B"),
    # whole-model runs on the ACE paper's platform: 16 NPUs, one iteration measured whole; in
    # exact mode (every NPU simulated) 8, its torus at 4x1x2: still rings in two dimensions
    # (a straggler or link flag the docs give names a rank below 8)
    (
        r"^acesim run (?=.*--exact)(?!.*(?:--npus|--shape|--nodes|-s |--system))",
        "acesim run --npus 8 ",
    ),
    # ...and half the NPUs of another type (--npu) on 16 NPUs: the same half of 8 (the torus's
    # second plane in its last dimension, as ranks 8-15 are of 16)
    (r"--exact --npus 16 (--npu '?)ranks=8-15\b", r"--exact --npus 8 \1ranks=4-7"),
    (r"^acesim run (?!.*(?:--npus|--shape|--nodes|-s |--system))", "acesim run --npus 16 "),
    (r"^acesim run (?!.*(?:-n |--iterations|--warmup|--parallel))", "acesim run -n 1 --warmup 0 "),
    # a comparison over more iterations: the fewest that measure one (warm-up 1)
    (r"-n 5 --warmup 1\b", "-n 3 --warmup 1"),
    # sweeps in this process (their worker pool and Dask cluster are tests/test_sweep.py's)
    (r"^acesim sweep (?!.*(?:-j |--workers|--dask))", "acesim sweep -j 0 "),
    # ...and plans (theirs are tests/test_plan.py's)
    (r"^acesim plan (?!.*(?:-j |--workers|--dask))", "acesim plan -j 0 "),
    # the HBM analysis: one network size (its bisections are the cost)
    (r"^(acesim membw)(?!.*--npus)", r"\1 --npus 16"),
    # validation: the quick rows of one family
    (r"^acesim validate(?!.*--quick)", "acesim validate --quick"),
    (r"^acesim validate (?!.*--family)", "acesim validate --family kernels "),
    (r"--family kernels,collectives", "--family kernels"),
    # ...and a row held out: a system whose held-out world refits little (V100's: 0.8 CPU s;
    # H100's refits every preset its transfers feed, 18 fits, about 14 CPU s); the refits
    # themselves are tests/test_transfer.py's
    (r"--row h100-gemm-fp8-2048 --transfer", "--row v100-gemm-fp32-2048 --transfer"),
]

#: (pattern, replacement) applied in order to a ``python`` block's text: its LLM calls at the
#: batch and sequence of :data:`SMALL`'s LLM runs (the same calls, arguments and parallel plan).
SMALL_PYTHON: list[tuple[str, str]] = [
    (r"\bglobal_batch=\d+", "global_batch=4"),
    (r"\bseq=\d+", "seq=512"),
]

#: Files the docs name that a user writes themselves, created in the scratch folder.
FIXTURES: dict[str, str] = {
    "p.json": "[" + ", ".join(str(15 - i) for i in range(16)) + "]\n",
}


@dataclass(frozen=True)
class Block:
    """One fenced block: its document, 1-based line, language, text and skip reason."""

    document: Path
    line: int
    language: str
    text: str
    skip: str | None

    @property
    def id(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def blocks(document: Path) -> list[Block]:
    """The runnable fenced blocks of ``document``, in order."""
    text = document.read_text(encoding="utf-8")
    out = []
    for match in _FENCE.finditer(text):
        language = match.group(1).lower()
        if language not in RUN:
            continue
        before = text[: match.start()].rstrip("\n").splitlines()
        marker = _SKIP.search(before[-1]) if before else None
        line = text.count("\n", 0, match.start()) + 1
        skip = marker.group(1) if marker else None
        out.append(Block(document, line, language, match.group(2), skip))
    return out


def commands(block: Block) -> list[list[str]]:
    """The commands of a shell block, each as argv, made small (:data:`SMALL`)."""
    lines = block.text.splitlines()
    if block.language == "console":
        lines = [ln[2:] for ln in lines if ln.startswith("$ ")]
    joined = "\n".join(lines).replace("\\\n", " ")
    out: list[list[str]] = []
    for raw in joined.splitlines():
        for part in raw.split("&&"):
            words = shlex.split(part, comments=True)
            if "|" in words:  # piped into another tool (jq): the acesim command runs
                words = words[: words.index("|")]
            if not words:
                continue
            text = shlex.join(words)
            for pattern, replacement in SMALL:
                text = re.sub(pattern, replacement, text)
            out.append(shlex.split(text))
    return out


def script(block: Block) -> str:
    """A ``python`` block's text, made small (:data:`SMALL_PYTHON`)."""
    text = block.text
    for pattern, replacement in SMALL_PYTHON:
        text = re.sub(pattern, replacement, text)
    return text
