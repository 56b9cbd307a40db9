"""The 2026 study's report (``report.md``) from its summary (:mod:`.ace2026`).

Sections: the question and how it is answered; per system, a table of every case with each
substrate's speedup over the best SM configuration; where each substrate beats it (the
answer); why, case by case (what differs from the best SM configuration, and what bound the
communication); what could not run, with the reason; the assumptions the substrates rest on.
"""

from __future__ import annotations

from typing import Any

__all__ = ["report_markdown"]


def _cell(out: dict[str, Any]) -> str:
    if not out["applicable"]:
        return "n/a"
    return f"{out['speedup']:.3f}x"


def _energy_cell(out: dict[str, Any], sm: dict[str, Any]) -> str:
    energy = out.get("energy") if out["applicable"] else None
    if energy is None:
        return "n/a"
    change = energy["per_iteration"] / sm["energy"]["per_iteration"] - 1
    return f"{energy['per_iteration']:.1f} J ({100 * change:+.1f}%)"


def _energy_lines(summary: dict[str, Any]) -> list[str]:
    """Energy per GPU per iteration of every substrate, side by side, with its change from
    the best SM configuration (nothing where the systems have no power model)."""
    kinds = summary["endpoints"]
    reference, others = kinds[0], kinds[1:]
    rows = [
        r
        for r in summary["results"]
        if r["applicable"] and r["endpoints"][reference].get("energy") is not None
    ]
    if not rows:
        return []
    lines = [
        "## Energy per iteration",
        "",
        "Energy per GPU per iteration from the power model (`acesim.hardware.power`,",
        "docs/energy.md: sourced or assumed coefficients times what each run counted; not",
        "fitted to a power measurement), the best SM configuration's with its average board",
        "power and energy per token, every other substrate's with its change from it.",
        "",
        "| system | case | best SM | power | J/token | " + " | ".join(others) + " |",
        "|---|---|---:|---:|---:|" + "---:|" * len(others),
    ]
    for r in rows:
        sm = r["endpoints"][reference]
        energy = sm["energy"]
        lines.append(
            f"| {r['system']} | {r['case']} | {energy['per_iteration']:.1f} J | "
            f"{energy['average_power']:.0f} W | {energy['per_token']:.3f} | "
            + " | ".join(_energy_cell(r["endpoints"][k], sm) for k in others)
            + " |"
        )
    return [*lines, ""]


def report_markdown(summary: dict[str, Any]) -> str:
    """The report (module docstring)."""
    lines = _case_lines(summary) + _system_lines(summary) + _energy_lines(summary)
    lines += _verdict_lines(summary) + _why_lines(summary) + _appendix_lines(summary)
    return "\n".join(lines)


def _case_lines(summary: dict[str, Any]) -> list[str]:
    """The question, the conventions and the cases."""
    tie = summary["tie"]
    lines = [
        "# ACE's question on 2026 systems: LLM training with hybrid parallelism",
        "",
        f"Question: {summary['question']}? Every number below comes from the model: the",
        "shipped node presets (calibrated kernel and collective models; their assumptions in",
        "the presets' [sources]), nothing tuned for this study. Precision "
        f"{summary['precision']}; one training iteration simulated with every GPU.",
        "",
        "The *best SM configuration* is the fastest of the SM endpoint's splits (NCCL-like",
        "kernels on the GPU's SMs, the preset's `[endpoint.baseline] splits`); on a preset whose",
        "`collective.choices` offer NVLS, NCCL's tuner already picks ring or NVLS per",
        "all-reduce in it. Speedup = its iteration time / the substrate's; a substrate",
        f"*beats* it above 1 + {tie:g}, *ties* within {tie:g} of 1 (a reporting convention).",
        "",
        "## Cases",
        "",
        "| case | model | GPUs | parallel | global batch | configuration |",
        "|---|---|---:|---|---:|---|",
    ]
    for c in summary["cases"]:
        lines.append(
            f"| {c['name']} | {c['model']} | {c['gpus']} | `{c['parallel']}` | "
            f"{c['global_batch']} | {c['source']} |"
        )
    lines += [
        "",
        "Global batches are cut to what two cores simulate in minutes: fewer micro-batches per",
        "iteration than production runs, so the data-parallel collectives weigh more in the",
        "iteration than at a production batch.",
        "",
    ]
    return lines


def _system_lines(summary: dict[str, Any]) -> list[str]:
    """One table per system: the best SM configuration and every substrate's speedup."""
    kinds = summary["endpoints"]
    reference, others = kinds[0], kinds[1:]
    lines: list[str] = []
    for system in summary["systems"]:
        rows = [r for r in summary["results"] if r["system"] == system]
        lines += [
            f"## {system}",
            "",
            "| case | best SM (split) | iteration | tokens/s/GPU | MFU | "
            + " | ".join(others)
            + " |",
            "|---|---|---:|---:|---:|" + "---:|" * len(others),
        ]
        for r in rows:
            if not r["applicable"]:
                lines.append(f"| {r['case']} | not applicable: {r['reason']} |")
                continue
            sm = r["endpoints"][reference]
            lines.append(
                f"| {r['case']} | {sm['variant']} | {1e3 * sm['iteration_time']:.1f} ms | "
                f"{sm['tokens_per_s_per_gpu']:,.0f} | {100 * sm['mfu']:.1f}% | "
                + " | ".join(_cell(r["endpoints"][k]) for k in others)
                + " |"
            )
        lines.append("")
    return lines


def _verdict_lines(summary: dict[str, Any]) -> list[str]:
    """Where each substrate beats the best SM configuration, and where ideal is beaten."""
    lines: list[str] = []
    others = summary["endpoints"][1:]
    lines += ["## Where each substrate beats the best SM configuration", ""]
    for kind in others:
        head = summary["headline"].get(kind)
        wins = summary["wins"].get(kind, [])
        if head is None:
            lines.append(f"* **{kind}**: ran nowhere (see *Not applicable*).")
            continue
        where = ", ".join(f"{w['system']} {w['case']} {w['speedup']:.3f}x" for w in wins)
        lines.append(
            f"* **{kind}**: beats it in {head['beats']} of {head['runs']} runs, ties in "
            f"{head['ties']}, loses in {head['loses']}; from {head['min']['speedup']:.3f}x "
            f"({head['min']['system']} {head['min']['case']}) to {head['max']['speedup']:.3f}x "
            f"({head['max']['system']} {head['max']['case']})."
            + (f" Wins: {where}." if where else "")
        )
    if summary["ideal_beaten"]:
        lines += [
            "",
            "The ideal endpoint is not the fastest in: "
            + ", ".join(f"{o['system']} {o['case']} ({o['kind']})" for o in summary["ideal_beaten"])
            + " (it only removes the endpoint's cost; a substrate that changes the algorithm,"
            " as NVLS does, can move fewer bytes on the links than the ideal endpoint's ring).",
        ]
    return lines


def _why_lines(summary: dict[str, Any]) -> list[str]:
    """Case by case: where each substrate's iteration differs and what bound it."""
    kinds = summary["endpoints"]
    reference = kinds[0]
    lines: list[str] = []
    lines += [
        "",
        "## Why, case by case",
        "",
        "For each substrate: where its iteration differs from the best SM configuration's",
        "(compute: kernels slowed by SMs or HBM taken by communication; exposed communication",
        "by kind; the pipeline bubble), and what bound its communication on rank 0 (the",
        "resource busy longest while its collectives ran, `acesim.training.bounds`).",
        "",
        "| system | case | substrate | speedup | exposed comm | bound (iteration) | why |",
        "|---|---|---|---:|---:|---|---|",
    ]
    for r in summary["results"]:
        if not r["applicable"]:
            continue
        for kind in kinds:
            out = r["endpoints"][kind]
            if not out["applicable"]:
                continue
            why = out["why"] if kind != reference else f"comm bound by {out['comm_bound']}"
            lines.append(
                f"| {r['system']} | {r['case']} | {kind} | {out['speedup']:.3f}x | "
                f"{1e3 * out['exposed_total']:.1f} ms | {out['bound']} | {why} |"
            )
    return lines


def _appendix_lines(summary: dict[str, Any]) -> list[str]:
    """What did not apply, the assumptions the substrates rest on, the figures."""
    lines: list[str] = []
    lines += [
        "",
        "## Not applicable",
        "",
        "| system | case | substrate | reason |",
        "|---|---|---|---|",
    ]
    for na in summary["not_applicable"]:
        lines.append(
            f"| {na['system']} | {na['case']} | {na['kind'] or 'every substrate'} | "
            f"{na['reason']} |"
        )
    lines += [
        "",
        "## Assumptions the substrates rest on",
        "",
        "| system | field | source | note |",
        "|---|---|---|---|",
    ]
    for system, fields in summary["sources"].items():
        for path, src in fields.items():
            lines.append(f"| {system} | `{path}` | {src['kind']} | {src['note']} |")
    lines += [
        "",
        "## Figures",
        "",
        "speedup.png (every substrate's speedup per case and system), exposed.png (compute,",
        "bubble and exposed communication by kind per substrate) (and .svg).",
        "",
    ]
    return lines
