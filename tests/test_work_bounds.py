"""The work bounds of issue 33 item 4: every run kind's estimate is checked against
``run.max_messages`` before it starts, LLM runs' micro-batches against
``run.max_micro_batches``; both refused with the estimate, both raised knowingly."""

from __future__ import annotations

import pytest
from clitools import cli_error

import acesim
from acesim.errors import ConfigError

LLM = ("run", "-s", "h100-nvswitch-8", "-w", "llama3-8b", "--parallel", "tp=8")


def test_a_run_past_the_message_bound_is_refused_with_its_estimate(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(
        monkeypatch, capsys, "run", "-w", "resnet50", "--npus", "8", "--endpoint", "baseline",
        "--max-messages", "10",
    )  # fmt: skip
    prefix = "error: run.max_messages: the run on the baseline endpoint would send about "
    assert line.startswith(prefix)
    assert "more than the bound; raise it knowingly (--max-messages N" in line
    assert line.endswith("got 10")


def test_a_comparison_past_the_message_bound_names_the_run_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A comparison runs several endpoints (the baseline in its variants): the refusal says
    which run would go past the bound."""
    line = cli_error(
        monkeypatch, capsys, "run", "-w", "resnet50", "--npus", "8", "--max-messages", "10"
    )
    assert line.startswith("error: run.max_messages: the run on the baseline endpoint (")
    assert " units) would send about " in line


def test_an_llm_run_past_the_message_bound_is_refused_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(
        monkeypatch, capsys, *LLM, "--global-batch", "2", "--endpoint", "baseline",
        "--max-messages", "10",
    )  # fmt: skip
    assert line.startswith("error: run.max_messages: the run on the baseline endpoint would send")


def test_the_micro_batch_bound_is_a_flag_that_lowers_and_raises_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(
        monkeypatch, capsys, *LLM, "--global-batch", "8", "--endpoint", "baseline",
        "--max-micro-batches", "4",
    )  # fmt: skip
    assert "makes 8 micro-batches to simulate" in line
    assert "more than the bound 4 (run.max_micro_batches; --max-micro-batches N" in line
    # the Python API takes the same bound as a run option, and raising it lets the run start
    with pytest.raises(ConfigError, match="more than the bound 1 "):
        acesim.run("h100-nvswitch-8", "llama3-8b", parallel="tp=8", global_batch=2,
                   max_micro_batches=1)  # fmt: skip
    result = acesim.run(
        "h100-nvswitch-8", "llama3-8b", parallel="tp=8", global_batch=2, max_micro_batches=2
    )
    assert result.micro_batches == 2


def test_the_micro_batch_bound_applies_to_llm_runs_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = cli_error(monkeypatch, capsys, "run", "-w", "resnet50", "--max-micro-batches", "4")
    assert line.startswith("error: --max-micro-batches: applies to LLM models")
    with pytest.raises(ConfigError, match="run.max_micro_batches: applies to LLM runs only"):
        acesim.run("ace-isca21", "resnet50", max_micro_batches=4)


def test_membw_refuses_an_npu_count_it_could_not_plan(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``membw --npus 4294967296 --no-simulate`` never ended (issue 33 item 4): refused at
    once, naming the bound and why."""
    line = cli_error(monkeypatch, capsys, "membw", "--npus", "16,4294967296", "--no-simulate")
    assert line == (
        "error: --npus: each count must be 1 to 1,048,576 (2**20: planning a platform costs "
        "about 63 us per NPU, about a minute at the bound), got 4294967296"
    )
