"""``kvright plan``'s cold start: the ``cold_start_seconds`` object in the JSON and the section in the
human output, one per weight source, from the chosen plan.

Runs ``kvright.cli.main`` in-process (stdout captured); the expected seconds come from
:func:`capacity.plan_cold_starts` on the same plan, so a changed default changes both.
"""

from __future__ import annotations

import json

import pytest

import capacity as cap
from capacity.coldstart import SOURCES
from kvright.cli import main

ARGS = ("plan", "llama-3.1-70b", "--gpu", "h100-sxm", "--max-model-len", "8192", "--tpot-ms", "50")


def plan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main([*ARGS, *argv])
    return code, capsys.readouterr().out


def expected(concurrency: int) -> dict[str, cap.ColdStart]:
    arch = cap.catalog_architecture("llama-3.1-70b")
    result = cap.plan(
        arch,
        cap.gpu_spec("h100-sxm"),
        cap.Workload(max_model_len=8192, concurrency=concurrency),
        cap.SLO(tpot_seconds=0.05),
        cap.Limits(),
    )
    return cap.plan_cold_starts(result, checkpoint_bytes=cap.weight_bytes(arch))


def test_plan_json_has_the_cold_start_of_every_source_in_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = plan(capsys, "--concurrency", "64", "--json")
    assert code == 0
    seconds = json.loads(out)["cold_start_seconds"]
    assert list(seconds) == list(SOURCES)
    assert seconds == {s: pytest.approx(c.seconds, abs=0.05) for s, c in expected(64).items()}
    assert seconds["cache"] < seconds["hub"]


def test_plan_text_prints_a_cold_start_row_per_source(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = plan(capsys, "--concurrency", "64")
    assert code == 0
    section = out.split("cold start per pod", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    starts = expected(64)
    assert [row.split()[0] for row in section] == list(SOURCES)
    for row, (source, start) in zip(section, starts.items(), strict=True):
        assert row.split()[1] == f"{start.seconds:.0f}", source
    assert "filled once by a download Job" in section[SOURCES.index("cache")]
    assert "fetch" not in section[SOURCES.index("pvc")]


def test_an_infeasible_plan_prints_no_cold_start(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = plan(capsys, "--concurrency", "64", "--max-gpus", "1", "--json")
    assert code == 1
    assert json.loads(out)["cold_start_seconds"] == {}
