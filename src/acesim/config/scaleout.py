"""Scaling a node out: ``nodes = N`` copies of a system joined by its ``[scale_out]`` dimension.

A node preset (8 GPUs on NVSwitch, a 72-GPU NVL72 rack) describes one node; its
``[scale_out]`` table is the network between nodes (NICs and the switch fabric behind them), as
seen from one NPU: ``kind``, ``link_bandwidth``, ``links_per_npu``, ``link_latency``. With
``nodes = N >= 2`` the node's dimensions stay as they are and one dimension of that template, of
size ``N``, is appended last (named ``scaleout`` unless the table names it), so an 8-GPU node
on 4 nodes is an ``8 x 4`` network of 32 NPUs and hierarchical collectives reduce inside the node
first. The new dimension is a network dimension (``network = true``: NCCL's network step
latencies apply to its steps, and NCCL's flat ring crosses it once per channel, see
:mod:`acesim.network.plan`). ``nodes = 1`` is the node itself. The sources of
``scale_out.*`` values are copied to the new dimension's fields, so ``acesim assumptions``
lists them where they apply.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import ValidationError

from ..errors import ConfigError
from .errors import config_error_from
from .system import ScaleOutConfig

__all__ = ["scale_out"]

_TEMPLATE_KEYS = (
    "kind",
    "link_bandwidth",
    "links_per_npu",
    "link_latency",
    "switch_reduction",
    "efficiency",
    "npus_per_link",
    "leaf_size",
    "oversubscription",
    "nic_efficiency",
    "pcie_bandwidth",
    "pcie_efficiency",
    "ports_per_nic",
    "net_overhead",
    "power",
)


def scale_out(doc: dict[str, Any], nodes: int, field: str = "nodes") -> dict[str, Any]:
    """A copy of system document ``doc`` spanning ``nodes`` nodes (module docstring).

    One-line ConfigError naming ``field``: ``nodes`` not a whole number of at least 1, a system
    without ``[scale_out]``, a system that already has a dimension of the scale-out name, or
    per-dimension algorithm lists (which would need an entry for the new dimension).
    """
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        raise ConfigError(field, "must be a whole number of at least 1", nodes)
    template = doc.get("scale_out")
    if not isinstance(template, dict):
        name = doc.get("name", "the system")
        raise ConfigError(
            field,
            f"needs a [scale_out] table in the system (how its nodes are joined); {name} has none",
            nodes,
        )
    try:  # its own errors name scale_out.*, not the dimension made from it
        ScaleOutConfig.model_validate(template)
    except ValidationError as exc:
        raise config_error_from(exc, ScaleOutConfig, "scale_out") from None
    if nodes == 1:
        return doc
    out = copy.deepcopy(doc)
    network = out.setdefault("network", {})
    dims = network.setdefault("dimensions", [])
    if not isinstance(dims, list):
        return out  # validation reports it
    dim_name = template.get("name", "scaleout")
    if any(isinstance(d, dict) and d.get("name") == dim_name for d in dims):
        raise ConfigError(
            field,
            f"the system already has a dimension named {dim_name!r} (is it scaled out already?)",
            nodes,
        )
    for op, choice in (out.get("collective", {}).get("algorithms", {}) or {}).items():
        if isinstance(choice, list):
            raise ConfigError(
                field,
                f"collective.algorithms.{op} lists one algorithm per dimension; give the "
                "scale-out dimension's too (write the network out) or name one algorithm",
                nodes,
            )
    index = len(dims)
    dimension = {"name": dim_name, "size": nodes}
    dimension.update({k: copy.deepcopy(template[k]) for k in _TEMPLATE_KEYS if k in template})
    dimension.setdefault("kind", "switch")
    dimension["network"] = True  # NICs between nodes: NCCL's network step latencies apply
    dims.append(dimension)
    network.pop("npus", None)
    sources = out.get("sources")
    if isinstance(sources, dict):
        for path, source in list(sources.items()):
            key = path.removeprefix("scale_out.")
            if key != path and key.split(".")[0] in _TEMPLATE_KEYS:  # power.* included
                sources.setdefault(f"network.dimensions[{index}].{key}", copy.deepcopy(source))
    return out
