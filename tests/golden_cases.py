"""The golden corpus's cases: the one list of simulations whose numbers must not move.

Each :class:`GoldenCase` has a stable id, the run kind whose numbers it records (the output's
schema: ``collective``, ``run``, ``comparison``, ``llm``, ``reproduction``, ``study-2026``) and
how to run it: ``acesim`` command-line arguments (``argv``, run in this process with
``--json``), or a call of the public Python API (``api`` with ``params``: ``golden_corpus.API``).
``{inputs}`` in an argument is a folder of prepared inputs (:data:`INPUTS`: small ASTRA-sim 1.0
text workloads, a placement file, Chakra traces written by ``acesim export-chakra``), each made
on first use.

Sizes are chosen for speed (the whole corpus runs in about 70 CPU seconds): small NPU counts,
short LLM sequences and global batches, two iterations (both measured) where the default would
run three, two collective sizes for most endpoint-kind and variation cases. Ids read
``kind/system/workload-or-op/endpoint/mode`` (``auto-exact``: variation not asked for exact
mode, which the run then switches to by itself); they key ``tests/golden/<kind>.json``. A new
case is one line here, then ``python scripts/golden.py --update --only 'ITS-ID'``.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from acesim.commands.cases import FLAGS
from acesim.config.variation import Variation

__all__ = ["GoldenCase", "CASES", "INPUTS", "KINDS", "VARIATIONS", "inputs_of", "variation_of"]

#: The run kinds, each with its own data file and its own extraction of numbers.
KINDS = ("collective", "run", "comparison", "llm", "reproduction", "study-2026", "jobs")

#: What makes ranks differ (acesim's :class:`~acesim.config.variation.Variation` fields and a
#: placement), each with the flag that asks for it.
VARIATIONS: dict[str, str] = {
    name: FLAGS[f"run.{name}"] for name in (*(f.name for f in fields(Variation)), "placement")
}


@dataclass(frozen=True)
class GoldenCase:
    """One simulation (or one comparison, or one reduced study) of the corpus."""

    id: str
    kind: str
    argv: tuple[str, ...] = ()
    api: str = ""
    params: dict[str, Any] = field(default_factory=dict)

    def how(self) -> str:
        """How to run it, as one line (recorded beside its numbers)."""
        if self.argv:
            return "acesim " + shlex.join(self.argv)
        return f"{self.api}(**{json.dumps(self.params, sort_keys=True)})"


def variation_of(case: GoldenCase) -> tuple[str, ...]:
    """The variations (:data:`VARIATIONS`) ``case`` asks for: by flag, or by API parameter."""
    return tuple(
        name for name, flag in VARIATIONS.items() if flag in case.argv or name in case.params
    )


def _cli(kind: str, case_id: str, args: str) -> GoldenCase:
    return GoldenCase(f"{kind}/{case_id}", kind, tuple(shlex.split(args)))


# --- inputs: written into a scratch folder before the cases that name them run --------------

#: A data-parallel ASTRA-sim 1.0 workload: four layers, fixed compute times (cycles of 1 ns),
#: one weight-gradient all-reduce each.
ASTRA_DATA = """DATA
4
l0 -1 20000 NONE 0 15000 NONE 0 18000 ALLREDUCE 1048576 1000
l1 -1 50000 NONE 0 40000 NONE 0 42000 ALLREDUCE 4194304 1000
l2 -1 30000 NONE 0 25000 NONE 0 26000 ALLREDUCE 262144 1000
l3 -1 80000 NONE 0 70000 NONE 0 75000 ALLREDUCE 16777216 1000
"""
#: ASTRA-sim 1.0's HYBRID_DLRM convention: a model-parallel embedding (all-to-alls forward and
#: backward), then MLP layers that all-reduce their gradients (the bottom MLP ends at layer 1).
ASTRA_DLRM = """HYBRID_DLRM 1
3
emb -1 30000 ALLTOALL 1048576 0 ALLTOALL 1048576 10000 NONE 0 100
bot -1 20000 NONE 0 15000 NONE 0 18000 ALLREDUCE 524288 1000
top -1 40000 NONE 0 35000 NONE 0 38000 ALLREDUCE 2097152 1000
"""
#: ASTRA-sim 1.0's MICRO loop: one all-reduce (as its microAllReduce.txt, smaller).
ASTRA_MICRO = """MICRO
1
allreduce -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 8388608 5
"""

#: name -> ("text", file content) or ("export", ``acesim export-chakra`` arguments after the
#: prefix). A case names one as ``{inputs}/<name>``.
INPUTS: dict[str, tuple[str, str]] = {
    "data.txt": ("text", ASTRA_DATA),
    "dlrm.txt": ("text", ASTRA_DLRM),
    "micro.txt": ("text", ASTRA_MICRO),
    # workload rank r on NPU position p[r]: 8 NPUs, the order reversed
    "placement8.json": ("text", json.dumps([7, 6, 5, 4, 3, 2, 1, 0])),
    "chakra-dlrm": ("export", "-w dlrm --npus 8"),
    "chakra-data": ("export", "-w {inputs}/data.txt -s h100-nvswitch-8"),
    "chakra-llm": (
        "export",
        "-s h100-nvswitch-8 -w llama3-8b --parallel tp=2,pp=2 --seq 128 --global-batch 2",
    ),
}


#: Four NPUs on one switch, two per leaf, the leaves' uplinks 2:1 oversubscribed (jobs).
SPINE = {
    "name": "spine",
    "network": {
        "dimensions": [
            {
                "kind": "switch",
                "size": 4,
                "link_bandwidth": "100 GB/s",
                "link_latency": "1 us",
                "links_per_npu": 1,
                "leaf_size": 2,
                "oversubscription": 2.0,
            }
        ]
    },
    "collective": {"chunks": 2, "endpoint_delay": "1 us"},
    "endpoint": {"kind": "baseline"},
}


def _loop(name: str, place: dict[str, Any], size: str = "8 MiB", **extra: Any) -> dict[str, Any]:
    return {"name": name, "kind": "collective", "size": size, "placement": place, **extra}


#: Jobs specs (acesim jobs): a text input names other inputs as {inputs}/<name>.
JOBS = {
    "jobs-spine.json": {
        "system": SPINE,
        "iterations": 2,
        "warmup": 0,
        "jobs": [_loop("a", {"npus": "0,2"}), _loop("b", {"npus": "1,3"})],
    },
    "jobs-h100x2.json": {
        "system": "h100-nvswitch-8",
        "nodes": 2,
        "iterations": 3,
        "jobs": [
            {
                "name": "train",
                "kind": "training",
                "workload": "{inputs}/data.txt",
                "placement": {"nodes": "0"},
            },
            _loop("probe", {"policy": "packed", "count": 8}, size="64 MiB", iterations=3),
            _loop("late", {"nodes": "0"}, size="1 MiB", after="probe", iterations=3, warmup=0),
        ],
        "colocate": True,
    },
    "jobs-llm.json": {
        "system": "h100-nvswitch-8",
        "iterations": 1,
        "warmup": 0,
        "jobs": [
            {
                "name": "llm",
                "kind": "llm",
                "model": "llama3-8b",
                "parallel": "tp=4",
                "seq": 128,
                "global_batch": 1,
                "placement": {"npus": "0-3"},
            },
            _loop("serve", {"npus": "4-7"}, size="256 KiB", iterations=4, gap="20 us"),
        ],
    },
}
INPUTS.update({name: ("text", json.dumps(spec)) for name, spec in JOBS.items()})


def inputs_of(args: tuple[str, ...]) -> list[str]:
    """The inputs ``args`` name (``{inputs}/<name>`` in an argument), in order."""
    out = []
    for arg in args:
        for name in re.findall(r"\{inputs\}/([\w.-]+)", arg):
            if name not in out:
                out.append(name)
    return out


# --- collectives (acesim collective --json) -------------------------------------------------

SIZES = "4KiB,1MiB,128MiB"
BASIC_OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")
H100 = "-s h100-nvswitch-8"
#: ace-isca21 as a 16-NPU torus (4x2x2) for exact mode, whose cost grows with the NPUs.
TORUS16 = "--set network.dimensions[1].size=2 --set network.dimensions[2].size=2"
#: ace-isca21 as an 8-NPU torus (4x2x1).
TORUS8 = "--set network.dimensions[1].size=2 --set network.dimensions[2].size=1"
#: Two sizes (latency- and bandwidth-bound classes) for the cheaper added cases.
TWO_SIZES = "4KiB,1MiB"
#: The endpoint kinds besides the baseline's SM kernels (on an H100 node every one applies).
OFFLOADS = ("ace", "ideal", "copy_engine", "nvls")
COMPUTE = "--with-compute 1e12,2e9"


def _coll(case_id: str, args: str, sizes: str = SIZES) -> GoldenCase:
    return _cli("collective", case_id, f"collective --json --sizes {sizes} {args}")


def _collectives() -> Iterator[GoldenCase]:
    for op in BASIC_OPS:
        for kind in ("baseline", "ace", "ideal", "copy_engine"):
            yield _coll(f"ace-isca21/{op}/{kind}/symmetric", f"--op {op} --endpoint {kind}")
        for kind in ("baseline", "ace", "ideal", "copy_engine", "nvls"):
            yield _coll(
                f"h100-nvswitch-8/{op}/{kind}/symmetric", f"{H100} --op {op} --endpoint {kind}"
            )
        yield _coll(f"h100-nvswitch-8/{op}/baseline/exact", f"{H100} --exact --op {op}")
    for op, root in (("broadcast", 3), ("reduce", 2), ("broadcast", 0)):
        yield _coll(
            f"h100-nvswitch-8/{op}-root{root}/baseline/exact",
            f"{H100} --exact --op {op} --root {root}",
        )
    yield _coll(
        "h100-nvswitch-8/broadcast-root1/ace/exact",
        f"{H100} --exact --op broadcast --root 1 --endpoint ace",
    )
    yield _coll("h100-nvswitch-8/sendrecv/baseline/exact", f"{H100} --exact --op sendrecv")
    for kind in ("ace", "ideal", "copy_engine", "nvls"):
        yield _coll(f"h100-nvswitch-8/all-reduce/{kind}/exact", f"{H100} --exact --endpoint {kind}")
    for preset in (
        "a100-nvswitch-8",
        "h200-nvswitch-8",
        "b200-nvswitch-8",
        "mi300x-8",
        "gb200-nvl72",
    ):
        for op in ("all-reduce", "all-gather"):
            yield _coll(f"{preset}/{op}/baseline/symmetric", f"-s {preset} --op {op}")
    for preset in ("b200-nvswitch-8", "gb200-nvl72"):
        yield _coll(f"{preset}/all-reduce/nvls/symmetric", f"-s {preset} --endpoint nvls")
    yield _coll("mi300x-8/all-reduce/ace/symmetric", "-s mi300x-8 --endpoint ace")
    # "sm" names the baseline's SM kernels (an alias: results use the kind's own name)
    yield _coll(
        "a100-nvswitch-8/reduce-scatter/sm/symmetric",
        "-s a100-nvswitch-8 --op reduce-scatter --endpoint sm",
    )
    yield _coll("gb200-nvl72/all-reduce/baseline/exact", "-s gb200-nvl72 --exact", sizes="1MiB")
    yield from _endpoint_collectives()
    yield from _multinode_collectives()
    yield from _forced_collectives()
    yield from _varied_collectives()


def _endpoint_collectives() -> Iterator[GoldenCase]:
    """The other endpoint kinds on every operation in exact mode, point to point, rooted
    (which one representative cannot run: exact mode by itself) and searched."""
    for op in BASIC_OPS[1:]:
        for kind in OFFLOADS:
            yield _coll(
                f"h100-nvswitch-8/{op}/{kind}/exact",
                f"{H100} --exact --op {op} --endpoint {kind}",
                sizes=TWO_SIZES,
            )
    for kind in OFFLOADS:
        yield _coll(
            f"h100-nvswitch-8/sendrecv/{kind}/symmetric",
            f"{H100} --op sendrecv --endpoint {kind}",
            sizes=TWO_SIZES,
        )
    for op, root, kind in (
        ("broadcast", 2, "baseline"),
        ("reduce", 1, "copy_engine"),
        ("broadcast", 5, "nvls"),
        ("reduce", 3, "ideal"),
    ):
        yield _coll(
            f"h100-nvswitch-8/{op}-root{root}/{kind}/auto-exact",
            f"{H100} --op {op} --root {root} --endpoint {kind}",
            sizes=TWO_SIZES,
        )
    for case_id, args, sizes in (
        ("h100-nvswitch-8/all-reduce/baseline-search", H100, SIZES),
        ("h100-nvswitch-8/all-gather/copy_engine-search", f"{H100} --op all-gather", SIZES),
        ("h100-nvswitch-8/all-reduce/nvls-search", H100, TWO_SIZES),
        ("ace-isca21/all-reduce/ace-search", "", TWO_SIZES),
    ):
        kind = case_id.split("/")[2].removesuffix("-search")
        yield _coll(f"{case_id}/symmetric", f"{args} --endpoint {kind} --search", sizes=sizes)


def _multinode_collectives() -> Iterator[GoldenCase]:
    for nodes in (2, 4):
        for op in BASIC_OPS:
            yield _coll(
                f"h100-nvswitch-8x{nodes}/{op}/baseline/symmetric",
                f"{H100} --nodes {nodes} --op {op}",
            )
    for kind in ("ace", "ideal", "copy_engine", "nvls"):
        yield _coll(
            f"h100-nvswitch-8x2/all-reduce/{kind}/symmetric", f"{H100} --nodes 2 --endpoint {kind}"
        )
    yield _coll("h100-nvswitch-8x4/all-reduce/baseline/exact", f"{H100} --nodes 4 --exact")
    yield _coll(
        "h100-nvswitch-8x2/sendrecv/baseline/exact", f"{H100} --nodes 2 --exact --op sendrecv"
    )
    for preset in ("a100-nvswitch-8", "b200-nvswitch-8", "mi300x-8", "gb200-nvl72"):
        yield _coll(f"{preset}x2/all-reduce/baseline/symmetric", f"-s {preset} --nodes 2")
    for op, kind in (
        ("all-gather", "copy_engine"),
        ("all-to-all", "copy_engine"),
        ("reduce-scatter", "nvls"),
        ("all-gather", "ace"),
        ("reduce-scatter", "ideal"),
        ("all-to-all", "ideal"),
    ):
        yield _coll(
            f"h100-nvswitch-8x2/{op}/{kind}/symmetric",
            f"{H100} --nodes 2 --op {op} --endpoint {kind}",
            sizes=TWO_SIZES,
        )
    yield _coll(
        "gb200-nvl72x2/all-reduce/copy_engine/symmetric",
        "-s gb200-nvl72 --nodes 2 --endpoint copy_engine",
        sizes="1MiB,64MiB",
    )


def _forced_collectives() -> Iterator[GoldenCase]:
    """Algorithms and protocols forced as NCCL_ALGO / NCCL_PROTO would, channels, chunks."""
    for algo, proto in (("ring", "LL"), ("ring", "LL128"), ("ring", "Simple"), ("NVLS", "Simple")):
        yield _coll(
            f"h100-nvswitch-8/all-reduce/algo-{algo}-{proto}/symmetric",
            f"{H100} --algo {algo} --proto {proto}",
        )
    for op, algo in (
        ("all-reduce", "direct"),
        ("all-to-all", "direct"),
        ("all-gather", "halving_doubling"),
    ):
        yield _coll(
            f"h100-nvswitch-8/{op}/algo-{algo}/symmetric", f"{H100} --op {op} --algo {algo}"
        )
    for algo in ("ring", "flat_ring", "nvls_tree", "Tree"):
        yield _coll(
            f"h100-nvswitch-8x2/all-reduce/algo-{algo}/symmetric", f"{H100} --nodes 2 --algo {algo}"
        )
    yield _coll(
        "h100-nvswitch-8x2/all-reduce/algo-collnet/symmetric",
        f"{H100} --nodes 2 --algo collnet --set scale_out.switch_reduction=true",
    )
    yield _coll(
        "h100-nvswitch-8/all-gather/channels4/symmetric", f"{H100} --op all-gather --channels 4"
    )
    yield _coll("ace-isca21/all-reduce/chunks8/symmetric", "--set collective.chunks=8")


def _varied_collectives() -> Iterator[GoldenCase]:
    """Concurrent compute; exact mode with failed or slower links and other NPUs."""
    for kind in ("baseline", "ace"):
        yield _coll(
            f"ace-isca21/all-reduce/{kind}-with-compute/symmetric", f"--endpoint {kind} {COMPUTE}"
        )
    yield _coll(
        "h100-nvswitch-8/all-gather/copy_engine-with-compute/symmetric",
        f"{H100} --op all-gather --endpoint copy_engine {COMPUTE}",
    )
    exact16 = f"--exact {TORUS16}"
    for kind in ("baseline", "ideal"):
        yield _coll(f"ace-isca21-16/all-reduce/{kind}/exact", f"{exact16} --endpoint {kind}")
        yield _coll(
            f"ace-isca21-16/all-reduce/{kind}-failed-link/exact",
            f"{exact16} --endpoint {kind} --link dim=0,rank=3,direction=+,failed=true",
        )
    yield _coll("ace-isca21-16/sendrecv/baseline/exact", f"{exact16} --op sendrecv")
    yield _coll(
        "ace-isca21-16/reduce-scatter/baseline-slow-link/exact",
        f"{exact16} --op reduce-scatter --link dim=1,rank=5,bandwidth=25GB/s,latency=2us",
    )
    yield _coll(
        "ace-isca21-16/all-reduce/baseline-npu-types-with-compute/exact",
        f"{exact16} --npu ranks=0-3,preset=a100-sxm {COMPUTE}",
    )
    yield _coll(
        "h100-nvswitch-8/all-reduce/baseline-npu-field-with-compute/exact",
        f"{H100} --exact --npu ranks=4-7,hbm_bandwidth=2TB/s {COMPUTE}",
    )
    yield from _auto_exact_collectives()


def _auto_exact_collectives() -> Iterator[GoldenCase]:
    """Variation without --exact: the run switches to exact mode by itself, on every kind."""
    slow = "--link dim=0,rank=1,bandwidth=100GB/s"
    for kind in ("baseline", *OFFLOADS):
        yield _coll(
            f"h100-nvswitch-8/all-reduce/{kind}-slow-link/auto-exact",
            f"{H100} --endpoint {kind} {slow}",
            sizes=TWO_SIZES,
        )
    for op, kind in (
        ("all-reduce", "ace"),
        ("all-gather", "copy_engine"),
        ("all-reduce", "nvls"),
        ("all-to-all", "ideal"),
    ):
        yield _coll(
            f"h100-nvswitch-8/{op}/{kind}-a100-ranks0-3/auto-exact",
            f"{H100} --op {op} --endpoint {kind} --npu ranks=0-3,preset=a100-sxm",
            sizes=TWO_SIZES,
        )
    yield _coll("ace-isca21-8/all-reduce/ace/exact", f"--exact {TORUS8} --endpoint ace", TWO_SIZES)
    yield _coll(
        "ace-isca21-8/all-reduce/ace-failed-link/auto-exact",
        f"{TORUS8} --endpoint ace --link dim=0,rank=3,direction=+,failed=true",
        sizes=TWO_SIZES,
    )


# --- training graphs (acesim run --endpoint KIND --json) ------------------------------------

#: Two iterations, both measured: fewer events than the default three with one warm-up.
SHORT = "-n 2 --warmup 0"
#: Zoo models on an H100 node, small: one sample per GPU, two iterations.
ZOO_H100 = f"{H100} {SHORT} --batch 1"
#: The ASTRA-sim data-parallel workload on ace-isca21 cut to 8 NPUs (4x2x1), for exact mode.
DATA8 = f"-w {{inputs}}/data.txt --npus 8 {SHORT} --exact"
#: The same, the mode left to the run (variation switches it to exact mode by itself).
DATA8_AUTO = DATA8.removesuffix(" --exact")


def _run(case_id: str, args: str) -> GoldenCase:
    return _cli("run", case_id, f"run --json {args}")


def _graph_runs() -> Iterator[GoldenCase]:
    data = "-w {inputs}/data.txt"
    for kind in ("baseline", "ace", "ideal", "copy_engine"):
        yield _run(f"ace-isca21/astra-data/{kind}/symmetric", f"{data} --endpoint {kind}")
    for kind in ("baseline", "ace", "ideal", "copy_engine", "nvls"):
        yield _run(
            f"h100-nvswitch-8/astra-data/{kind}/symmetric", f"{data} {H100} --endpoint {kind}"
        )
        yield _run(
            f"h100-nvswitch-8/astra-data/{kind}/exact", f"{data} {H100} --endpoint {kind} --exact"
        )
    for kind in ("baseline", "ace", "ideal"):
        yield _run(f"ace-isca21-8/astra-data/{kind}/exact", f"{DATA8} --endpoint {kind}")
    for loop in ("bucketed", "no_overlap"):
        for kind in ("baseline", "ace"):
            yield _run(
                f"ace-isca21/astra-data-{loop}/{kind}/symmetric",
                f"{data} --loop {loop} --bucket-size 4MiB --endpoint {kind}",
            )
    for kind in ("baseline", "ace", "ideal"):
        yield _run(
            f"ace-isca21-16/astra-dlrm/{kind}/symmetric",
            f"-w {{inputs}}/dlrm.txt --npus 16 --endpoint {kind}",
        )
    yield _run(
        "ace-isca21-16/astra-dlrm/ideal/exact",
        f"-w {{inputs}}/dlrm.txt --npus 16 {SHORT} --endpoint ideal --exact",
    )
    for kind in ("baseline", "ace"):
        yield _run(
            f"ace-isca21/astra-micro/{kind}/symmetric", f"-w {{inputs}}/micro.txt --endpoint {kind}"
        )
    yield _run(
        "ace-isca21-4x2x2/astra-data/baseline/symmetric",
        f"{data} --shape 4x2x2 --endpoint baseline",
    )
    # the HYBRID_DLRM loop's all-to-alls and the MICRO loop where the copy engines drive them
    for kind in ("baseline", *OFFLOADS):
        yield _run(
            f"h100-nvswitch-8/astra-dlrm/{kind}/symmetric",
            f"-w {{inputs}}/dlrm.txt {H100} --endpoint {kind}",
        )
    for kind in ("copy_engine", "nvls"):
        yield _run(
            f"h100-nvswitch-8/astra-micro/{kind}/symmetric",
            f"-w {{inputs}}/micro.txt {H100} --endpoint {kind}",
        )
    yield from _zoo_runs()
    yield from _varied_runs()
    yield from _chakra_runs()


def _zoo_runs() -> Iterator[GoldenCase]:
    # the reproduction's cases at 16 NPUs (the preset's [reproduction] batch and precision;
    # two iterations for the costlier models)
    for model, kinds, short in (
        ("resnet50", "baseline ace ideal", SHORT),
        ("dlrm", "baseline ace ideal", ""),
        ("gnmt", "baseline", SHORT),
    ):
        for kind in kinds.split():
            yield _run(
                f"ace-isca21-16/{model}/{kind}/symmetric",
                f"-w {model} --npus 16 {short} --endpoint {kind}",
            )
    yield _run(
        "h100-nvswitch-8/astra-data/baseline-search/symmetric",
        f"-w {{inputs}}/data.txt {H100} --endpoint baseline --search",
    )
    for model, kinds in (
        ("resnet50", "baseline"),
        ("gnmt", "baseline"),
        ("dlrm", "baseline nvls"),
        ("gpt", "baseline nvls"),
    ):
        for kind in kinds.split():
            yield _run(
                f"h100-nvswitch-8/{model}/{kind}/symmetric",
                f"-w {model} {ZOO_H100} --endpoint {kind}",
            )
    for model, kind in (
        ("resnet50", "ace"),
        ("dlrm", "copy_engine"),
        ("gpt", "copy_engine"),
    ):
        yield _run(
            f"h100-nvswitch-8/{model}/{kind}/symmetric", f"-w {model} {ZOO_H100} --endpoint {kind}"
        )
    yield _run(
        "h100-nvswitch-8/resnet50-fp32/ideal/symmetric",
        f"-w resnet50 {ZOO_H100} --precision fp32 --endpoint ideal",
    )
    for loop in ("bucketed", "no_overlap"):
        yield _run(
            f"h100-nvswitch-8/resnet50-{loop}/baseline/symmetric",
            f"-w resnet50 {ZOO_H100} --loop {loop} --endpoint baseline",
        )
    yield _run(
        "h100-nvswitch-8x2/dlrm/baseline/symmetric",
        f"-w dlrm {ZOO_H100} --nodes 2 --endpoint baseline",
    )
    for kind in ("baseline", "ideal"):
        yield _run(
            f"h100-nvswitch-8/dlrm/{kind}/exact", f"-w dlrm {ZOO_H100} --endpoint {kind} --exact"
        )
    # more of the reproduction's runs: an SRAM size of its sensitivity study, 32 NPUs
    yield _run(
        "ace-isca21-16/dlrm-sram2MiB/ace/symmetric",
        "-w dlrm --npus 16 --endpoint ace --set endpoint.ace.sram=2MiB",
    )
    for kind in ("baseline", "ace"):
        yield _run(f"ace-isca21-32/dlrm/{kind}/symmetric", f"-w dlrm --npus 32 --endpoint {kind}")


def _varied_runs() -> Iterator[GoldenCase]:
    """Exact mode with ranks that differ on purpose: stragglers, compute spread, links, NPU
    types, placement."""
    variations = {
        "straggler": "--straggler rank=3,slowdown=1.5",
        "spread": "--compute-spread spread=0.1,seed=7",
        "failed-link": "--link dim=0,rank=1,direction=+,failed=true",
        "slow-link": "--link dim=1,rank=5,bandwidth=10GB/s,latency=2us",
        "placement": "--placement {inputs}/placement8.json",
    }
    for name, args in variations.items():
        yield _run(
            f"ace-isca21-8/astra-data/ideal-{name}/exact", f"{DATA8} --endpoint ideal {args}"
        )
    for name in ("straggler", "failed-link", "placement"):
        yield _run(
            f"ace-isca21-8/astra-data/baseline-{name}/exact",
            f"{DATA8} --endpoint baseline {variations[name]}",
        )
    dlrm = f"-w dlrm {ZOO_H100} --exact"
    yield _run(
        "h100-nvswitch-8/dlrm/baseline-straggler/exact",
        f"{dlrm} --endpoint baseline --straggler rank=2,slowdown=1.3",
    )
    yield _run(
        "h100-nvswitch-8/dlrm/baseline-npu-types/exact",
        f"{dlrm} --endpoint baseline --npu ranks=0-3,preset=a100-sxm",
    )
    yield _run(
        "h100-nvswitch-8/dlrm/nvls-spread/exact",
        f"{dlrm} --endpoint nvls --compute-spread spread=0.2,seed=1",
    )
    yield _run(
        "h100-nvswitch-8/astra-data/copy_engine-straggler/exact",
        f"-w {{inputs}}/data.txt {H100} --exact --endpoint copy_engine"
        " --straggler rank=5,slowdown=2",
    )
    # not asked for exact mode: the run switches by itself
    for name in ("straggler", "spread", "placement"):
        yield _run(
            f"ace-isca21-8/astra-data/ace-{name}/auto-exact",
            f"{DATA8_AUTO} --endpoint ace {variations[name]}",
        )
    yield _run(
        "ace-isca21-8/astra-data/ace-a100-ranks0-3/auto-exact",
        f"{DATA8_AUTO} --endpoint ace --npu ranks=0-3,preset=a100-sxm",
    )
    h100_data = f"-w {{inputs}}/data.txt {H100} {SHORT}"
    for kind, args in (
        ("nvls-slow-link", "--link dim=0,rank=1,bandwidth=100GB/s"),
        ("copy_engine-placement", variations["placement"]),
        ("baseline-a100-ranks0-3", "--npu ranks=0-3,preset=a100-sxm"),
    ):
        yield _run(
            f"h100-nvswitch-8/astra-data/{kind}/auto-exact",
            f"{h100_data} --endpoint {kind.split('-')[0]} {args}",
        )


def _chakra_runs() -> Iterator[GoldenCase]:
    """Chakra traces written by ``acesim export-chakra`` (:data:`INPUTS`) and run back."""
    dlrm = "-w {inputs}/chakra-dlrm --npus 8"
    for kind in ("baseline", "ace", "ideal"):
        yield _run(f"ace-isca21-8/chakra-dlrm/{kind}/symmetric", f"{dlrm} --endpoint {kind}")
    yield _run("ace-isca21-8/chakra-dlrm/ideal/exact", f"{dlrm} --endpoint ideal --exact")
    data = f"-w {{inputs}}/chakra-data {H100} --endpoint baseline"
    yield _run("h100-nvswitch-8/chakra-astra-data/baseline/symmetric", data)
    yield _run("h100-nvswitch-8/chakra-astra-data/baseline/exact", f"{data} --exact")
    yield _run(
        "h100-nvswitch-8/chakra-llama3-8b-tp2pp2/baseline/exact",
        f"-w {{inputs}}/chakra-llm {H100} --endpoint baseline --exact",
    )
    yield _run("ace-isca21-8/chakra-dlrm/copy_engine/symmetric", f"{dlrm} --endpoint copy_engine")
    yield _run(
        "ace-isca21-8/chakra-dlrm/ace-straggler/auto-exact",
        f"{dlrm} --endpoint ace --straggler rank=1,slowdown=1.2",
    )
    chakra_data = f"-w {{inputs}}/chakra-data {H100}"
    yield _run("h100-nvswitch-8/chakra-astra-data/nvls/symmetric", f"{chakra_data} --endpoint nvls")
    yield _run(
        "h100-nvswitch-8/chakra-astra-data/ace/exact", f"{chakra_data} --endpoint ace --exact"
    )


# --- LLM training (acesim run -w MODEL --parallel ... --json) -------------------------------


def _llm(
    case_id: str, args: str, system: str = "h100-nvswitch-8", model: str = "llama3-8b"
) -> GoldenCase:
    # a case recorded in class mode asks for it (--full): LLM runs compose by default
    full = " --full" if case_id.endswith("/class") and "--exact" not in args else ""
    return _cli(
        "llm", f"{system}/{model}/{case_id}", f"run --json -s {system} -w {model} {args}{full}"
    )


#: Llama3 8B on one H100 node with short sequences (a fraction of a second per run).
TP8 = "--global-batch 1 --seq 512 --parallel tp=8"
TP2PP2 = "--global-batch 4 --seq 512 --parallel tp=2,pp=2"


def _llm_runs() -> Iterator[GoldenCase]:
    # the 2026 study's small case (as tests/test_reproduce_2026.py): every substrate
    for kind in ("baseline", "ace", "ideal", "copy_engine", "nvls"):
        yield _llm(f"tp8/{kind}/class", f"{TP8} --endpoint {kind}")
    yield _llm("tp8/endpoints-sm-copy_engine/class", f"{TP8} --endpoints sm,copy_engine")
    for kind in ("baseline", "nvls"):
        yield _llm(f"tp8-overlap/{kind}/class", f"{TP8},tp_overlap=1 --endpoint {kind}")
    for kind in ("baseline", "copy_engine"):
        yield _llm(f"tp2pp2vpp2/{kind}/class", f"{TP2PP2},vpp=2 --endpoint {kind}")
    yield _llm(
        "tp2cp2/baseline/class",
        "--parallel tp=2,cp=2 --global-batch 2 --seq 512 --endpoint baseline",
    )
    variants = {
        "zero0": ",zero=0",
        "sp0": ",sp=0",
        "grad-bf16": ",grad_fp32=0",
        "order-pp-dp": ",order=tp-cp-ep-pp-dp",
        "recompute-full": " --recompute full",
        "recompute-selective": " --recompute selective",
    }
    for name, change in variants.items():
        yield _llm(f"tp2pp2-{name}/baseline/class", f"{TP2PP2}{change} --endpoint baseline")
    # the default: composed where the iteration composes (pipeline stages, DP over two
    # nodes), class mode where it does not (FSDP over DP: its note says why)
    yield _llm("tp2pp2vpp2/baseline/composed", f"{TP2PP2},vpp=2 --endpoint baseline")
    yield _llm(
        "tp8pp2x2/baseline/composed",
        "--parallel tp=8,pp=2 --global-batch 4 --seq 512 --nodes 2 --endpoint baseline",
    )
    yield _llm("tp2pp2-zero3/baseline/default", f"{TP2PP2},zero=3 --endpoint baseline")
    # FSDP without pipeline stages: composed, each pass in its context
    yield _llm(
        "tp2-zero3/baseline/composed",
        "--parallel tp=2,zero=3 --global-batch 8 --seq 512 --endpoint baseline",
    )
    yield _llm(
        "tp2pp2-mb2/baseline/class",
        "--parallel tp=2,pp=2 --global-batch 8 --micro-batch 2 --seq 512 --endpoint baseline",
    )
    yield _llm(
        "tp8x2/baseline/class",
        "--parallel tp=8 --global-batch 2 --seq 512 --nodes 2 --endpoint baseline",
    )
    yield _llm(
        "tp8pp2x2/baseline/class",
        "--parallel tp=8,pp=2 --global-batch 4 --seq 512 --nodes 2 --endpoint baseline",
    )
    moe = "--global-batch 8 --seq 256 --nodes 4"
    yield _llm(
        "tp1ep8pp4x4/baseline/class",
        f"--parallel tp=1,ep=8,pp=4 {moe} --endpoint baseline",
        model="gpt-oss-120b",
    )
    yield _llm(
        "tp2ep8pp2x4/ideal/class",
        f"--parallel tp=2,ep=8,pp=2 {moe} --endpoint ideal",
        model="gpt-oss-120b",
    )
    yield _llm(
        "tp8-fp8/baseline/class",
        f"{TP8} --precision fp8 --endpoint baseline",
        system="b200-nvswitch-8",
    )
    yield _llm("tp8/ace/class", f"{TP8} --endpoint ace", system="b200-nvswitch-8")
    for system in ("a100-nvswitch-8", "mi300x-8"):
        yield _llm("tp8/baseline/class", f"{TP8} --endpoint baseline", system=system)
    yield _llm(
        "tp8dp9/baseline/class",
        "--parallel tp=8 --global-batch 9 --seq 512 --endpoint baseline",
        system="gb200-nvl72",
    )
    yield from _llm_schedule_runs()
    yield from _llm_study_runs()
    yield from _llm_exact_runs()


def _llm_study_runs() -> Iterator[GoldenCase]:
    """The 2026 study's layouts (its cases in acesim.studies.ace2026: data parallel with full
    recomputation, TP4 all-reduce, TP8 and TP8 PP4 over 4 nodes, DP64 over 8 nodes) on short
    sequences and small global batches."""
    layouts = {  # study case -> model, global batch and layout, endpoint kinds on H100
        "8b-8-dp": ("llama3-8b", "8 --parallel tp=1,pp=1,recompute=full", "baseline nvls"),
        "8b-8-tp4-allreduce": (
            "llama3-8b",
            "2 --parallel tp=4,pp=1,sp=0,zero=0",
            "baseline copy_engine",
        ),
        "8b-32-tp8": ("llama3-8b", "4 --parallel tp=8,pp=1 --nodes 4", "baseline"),
        "8b-64-dp": ("llama3-8b", "64 --parallel tp=1,pp=1,recompute=full --nodes 8", "baseline"),
        "70b-32-tp8pp4": ("llama3-70b", "4 --parallel tp=8,pp=4 --nodes 4", "baseline"),
    }
    for name, (model, layout, kinds) in layouts.items():
        for kind in kinds.split():
            yield _llm(
                f"{name}-seq128/{kind}/class",
                f"--seq 128 --global-batch {layout} --endpoint {kind}",
                model=model,
            )
    model, layout, _kinds = layouts["8b-8-tp4-allreduce"]
    yield _llm(
        "8b-8-tp4-allreduce-seq128/nvls/class",
        f"--seq 128 --global-batch {layout} --endpoint nvls",
        system="b200-nvswitch-8",
        model=model,
    )


def _llm_schedule_runs() -> Iterator[GoldenCase]:
    """Uneven stages, the registered pipeline schedules and MoE's expert parallelism with CP,
    FSDP, an SM budget of its own and DualPipe (issue 29)."""
    par = "--global-batch 8 --seq 256 --parallel tp=2,pp=2"
    for name, change in {
        "first15": ",first_stage_layers=15",
        "account": ",account_embedding=1,account_loss=1",
        "zb-h1": ",schedule=zb-h1",
        "zb-v": ",vpp=2,schedule=zb-v",
        "dualpipe": ",schedule=dualpipe",
        "dualpipev": ",vpp=2,schedule=dualpipev",
    }.items():
        yield _llm(f"tp2pp2-seq256-{name}/baseline/class", f"{par}{change} --endpoint baseline")
    yield _llm(
        "tp2pp4-seq256-offload-half/baseline/class",
        "--global-batch 8 --seq 256 --parallel tp=2,pp=4,offload=activations,offload_fraction=0.5"
        " --endpoint baseline",
    )
    moe = "--seq 256 --nodes 4 --endpoint baseline"
    for name, change in {
        "cp2ep8pp4": "tp=1,cp=2,ep=8,pp=4 --global-batch 4",
        "ep8pp2-zero3": "tp=1,ep=8,pp=2,zero=3 --global-batch 16",
        "ep8pp4-shared-overlap-units16": "tp=1,ep=8,pp=4,shared_expert_overlap=1,"
        "ep_comm_units=16 --global-batch 8",
    }.items():
        yield _llm(f"{name}/baseline/class", f"--parallel {change} {moe}", model="gpt-oss-120b")
    yield _llm(
        "ep8pp4-dualpipe-units20/baseline/class",
        f"--parallel tp=1,ep=8,pp=4,schedule=dualpipe,ep_comm_units=20 --global-batch 64 {moe}",
        system="b200-nvswitch-8",
        model="gpt-oss-120b",
    )


def _llm_exact_runs() -> Iterator[GoldenCase]:
    """Every GPU simulated: asked for, or because ranks differ (LLM runs then switch to exact
    mode by themselves: ``auto-exact``)."""
    par = "--global-batch 4 --seq 256 --parallel tp=2,pp=2"
    straggler = "--straggler rank=3,slowdown=1.3"
    yield _llm("tp2pp2-seq256/baseline/exact", f"{par} --endpoint baseline --exact")
    yield _llm(
        "tp2pp2-seq256/baseline-straggler/auto-exact", f"{par} --endpoint baseline {straggler}"
    )
    yield _llm(
        "tp2pp2-seq256/ideal-slow-link/auto-exact",
        f"{par} --endpoint ideal --link dim=0,rank=1,bandwidth=10GB/s",
    )
    yield _llm(
        "tp2pp2-seq256/baseline-a100-stage1/auto-exact",
        f"{par} --endpoint baseline --npu ranks=4-7,preset=a100-sxm",
    )
    yield _llm(
        "tp2pp2-seq256/baseline-placement/auto-exact",
        f"{par} --endpoint baseline --placement {{inputs}}/placement8.json",
    )
    small = "--global-batch 2 --seq 128 --parallel tp=2,pp=2"
    for kind in ("copy_engine", "nvls"):
        yield _llm(f"tp2pp2-seq128/{kind}/exact", f"{small} --endpoint {kind} --exact")
    yield _llm(
        "tp8-seq128/ace/exact", "--global-batch 1 --seq 128 --parallel tp=8 --endpoint ace --exact"
    )
    yield _llm(
        "tp2pp2-seq128/baseline-spread/auto-exact",
        f"{small} --endpoint baseline --compute-spread spread=0.1,seed=7",
    )
    yield _llm(
        "tp2pp2-seq128/copy_engine-straggler/auto-exact",
        f"{small} --endpoint copy_engine --straggler rank=5,slowdown=1.2",
    )
    yield _llm(
        "tp2pp2-seq128/nvls-h200-stage0/auto-exact",
        f"{small} --endpoint nvls --npu ranks=0-3,preset=h200-sxm",
    )
    yield _llm(
        "tp8-seq128/ace-straggler/auto-exact",
        "--global-batch 1 --seq 128 --parallel tp=8 --endpoint ace --straggler rank=3,slowdown=1.3",
    )


# --- comparisons (acesim run without --endpoint: best baseline vs ace vs ideal ...) ---------


def _comparisons() -> Iterator[GoldenCase]:
    every = "--endpoints baseline,ace,ideal,copy_engine,nvls"
    # the reproduction's DLRM case at 16 NPUs (acesim reproduce ace-isca21 --npus 16); the
    # reproduction's own code runs on 8 NPUs below
    yield _cli("comparison", "ace-isca21-16/dlrm/symmetric", "run --json -w dlrm --npus 16")
    yield _cli(
        "comparison",
        "ace-isca21-16/astra-data/symmetric",
        "run --json -w {inputs}/data.txt --npus 16",
    )
    yield _cli(
        "comparison",
        "h100-nvswitch-8/astra-data/symmetric",
        f"run --json -w {{inputs}}/data.txt {H100} {every}",
    )
    yield _cli(
        "comparison",
        "h100-nvswitch-8/astra-data/exact",
        f"run --json -w {{inputs}}/data.txt {H100} --exact",
    )
    yield _cli(
        "comparison", "h100-nvswitch-8/dlrm/symmetric", f"run --json -w dlrm {ZOO_H100} {every}"
    )
    yield _cli(
        "comparison",
        "h100-nvswitch-8/astra-dlrm/symmetric",
        f"run --json -w {{inputs}}/dlrm.txt {H100} --endpoints baseline,copy_engine,nvls",
    )
    yield GoldenCase(
        "comparison/ace-isca21-4/dlrm-no-overlap/api",
        "comparison",
        api="compare",
        params={
            "system": "ace-isca21",
            "workload": "dlrm",
            "npus": 4,
            "iterations": 2,
            "warmup": 0,
            "no_overlap": True,
        },
    )


# --- the public Python API's other entry points ---------------------------------------------


def _api_cases() -> Iterator[GoldenCase]:
    yield GoldenCase(
        "collective/ace-isca21/all-reduce-dim1/baseline/api",
        "collective",
        api="simulate_collective",
        params={"system": "ace-isca21", "op": "all-reduce", "size": "16 MiB", "dims": [1]},
    )
    yield GoldenCase(
        "collective/h100-nvswitch-8/all-gather-host-copy/copy_engine/api",
        "collective",
        api="simulate_collective",
        params={
            "system": "h100-nvswitch-8",
            "op": "all-gather",
            "size": "64 MiB",
            "endpoint": "copy_engine",
            "host_copy": [2**30, "h2d"],
        },
    )
    yield GoldenCase(
        "collective/h100-nvswitch-8/all-reduce-with-compute-straggler/baseline/api",
        "collective",
        api="simulate_collective",
        params={
            "system": "h100-nvswitch-8",
            "op": "all-reduce",
            "size": "64 MiB",
            "exact": True,
            "compute": [1e12, 2e9],
            "stragglers": [{"rank": 2, "slowdown": 1.5}],
        },
    )
    # not asked for exact mode: variation switches (a slow link: a straggler alone changes
    # nothing in a collective without compute kernels, which then runs symmetric)
    for kind in ("copy_engine", "nvls"):
        yield GoldenCase(
            f"collective/h100-nvswitch-8/reduce-scatter-slow-link/{kind}/api",
            "collective",
            api="simulate_collective",
            params={
                "system": "h100-nvswitch-8",
                "op": "reduce-scatter",
                "size": "16 MiB",
                "endpoint": kind,
                "links": [{"dim": 0, "rank": 6, "bandwidth": "10 GB/s"}],
            },
        )
    yield GoldenCase(
        "llm/h100-nvswitch-8/llama3-8b/tp8-iterations2/baseline/api",
        "llm",
        api="llm",
        params={
            "system": "h100-nvswitch-8",
            "model": "llama3-8b",
            "parallel": "tp=8",
            "global_batch": 1,
            "seq": 512,
            "iterations": 2,
            "mode": "class",
        },
    )


# --- the studies, reduced -------------------------------------------------------------------


def _studies() -> Iterator[GoldenCase]:
    yield GoldenCase(
        "reproduction/ace-isca21/dlrm-8",
        "reproduction",
        api="reproduce",
        params={"system": "ace-isca21", "workloads": ["dlrm"], "npus": [8]},
    )
    # the 2026 study's code on the small case of tests/test_reproduce_2026.py, on H100 (B200's
    # runs are LLM cases above)
    yield GoldenCase(
        "study-2026/h100-nvswitch-8/llama3-8b-tp8-seq512",
        "study-2026",
        api="study_2026",
        params={
            "systems": ["h100-nvswitch-8"],
            "name": "tiny",
            "model": "llama3-8b",
            "gpus": 8,
            "parallel": "tp=8",
            "global_batch": 1,
            "seq": 512,
        },
    )


def _jobs_cases() -> Iterator[GoldenCase]:
    for name in JOBS:
        case_id = name.removeprefix("jobs-").removesuffix(".json")
        yield _cli("jobs", case_id, f"jobs --json {{inputs}}/{name}")
    # every job on another endpoint kind (--endpoint)
    for name, kind in (
        ("jobs-spine.json", "ace"),
        ("jobs-spine.json", "ideal"),
        ("jobs-spine.json", "copy_engine"),
        ("jobs-h100x2.json", "nvls"),
    ):
        case_id = name.removeprefix("jobs-").removesuffix(".json")
        yield _cli("jobs", f"{case_id}/{kind}", f"jobs --json {{inputs}}/{name} --endpoint {kind}")


def _all() -> tuple[GoldenCase, ...]:
    cases = (
        *_collectives(),
        *_graph_runs(),
        *_llm_runs(),
        *_comparisons(),
        *_api_cases(),
        *_studies(),
        *_jobs_cases(),
    )
    ids = [c.id for c in cases]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    assert not repeated, f"golden case ids repeat: {repeated}"
    assert all(c.kind in KINDS for c in cases)
    return cases


#: Every case of the corpus, in a fixed order.
CASES: tuple[GoldenCase, ...] = _all()
