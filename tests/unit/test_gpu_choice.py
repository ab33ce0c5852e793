"""Choosing the GPU product by cost (capacity.choose_gpu and ``kvright plan --gpu any|A,B --price``).

Everything is the real planner over the real catalog; the prices are the catalog's list prices unless a
test sets its own. The rule: the cheapest feasible deployment (GPUs x price per GPU-hour) at the SLO wins,
ties go to more headroom, and a product that cannot hold the workload is listed with its reason.
"""

from __future__ import annotations

import dataclasses
import json
import shlex

import pytest

import capacity as cap
from capacity import roofline
from kvright.cli import main

LLAMA_8B = cap.load_architecture("llama-3.1-8b")
EVERY_GPU = [cap.gpu_spec(g) for g in cap.gpu_ids()]
WORKLOAD = cap.Workload(max_model_len=8192, concurrency=32)
SLO = cap.SLO(tpot_seconds=0.050)


def plan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code = main(["plan", *argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_any_gpu_plans_every_product_and_ranks_them_by_cost(capsys: pytest.CaptureFixture[str]) -> None:
    data = plan_json(capsys, "llama-3.1-8b", "--gpu", "any", "--tpot-ms", "50", "--concurrency", "32")
    assert data["feasible"] is True
    alternatives = data["alternatives"]
    assert {a["gpu"] for a in alternatives} == set(cap.gpu_ids())
    feasible = [a for a in alternatives if a["feasible"]]
    assert len(feasible) >= 3
    costs = [a["usd_per_hour"] for a in feasible]
    assert costs == sorted(costs)
    assert alternatives[0]["why"] == "chosen" and alternatives[0]["gpu"] == data["plan"]["gpu"]
    assert data["plan"]["gpu_product"] == cap.gpu_spec(data["plan"]["gpu"]).product_labels[0]
    assert data["plan"]["usd_per_hour"] == alternatives[0]["usd_per_hour"]
    for loser in feasible[1:]:
        assert loser["why"].startswith(("costs more", "same cost")), loser
        assert loser["usd_per_million_output_tokens"] > 0
    for a in alternatives:
        if not a["feasible"]:
            assert a["why"].startswith(f"not feasible on {a['gpu']}: ") and a["usd_per_hour"] is None


def test_a_price_change_moves_the_choice(capsys: pytest.CaptureFixture[str]) -> None:
    base = shlex.split("llama-3.1-8b --gpu any --tpot-ms 50 --concurrency 32 --max-model-len 8192")
    first = plan_json(capsys, *base)
    chosen = first["plan"]["gpu"]
    runner_up = next(a for a in first["alternatives"][1:] if a["feasible"])
    # Make the chosen product ten times dearer and the runner-up free: the runner-up must win.
    data = plan_json(capsys, *base, "--price", f"{chosen}=100", "--price", f"{runner_up['gpu']}=0")
    assert data["plan"]["gpu"] == runner_up["gpu"]
    assert data["alternatives"][0]["usd_per_hour"] == 0.0


def test_a_comma_list_is_the_allowed_products(capsys: pytest.CaptureFixture[str]) -> None:
    data = plan_json(capsys, "llama-3.1-8b", "--gpu", "l4,NVIDIA-H100-80GB-HBM3", "--tpot-ms", "50",
                     "--concurrency", "8", "--max-model-len", "8192")  # fmt: skip
    assert {a["gpu"] for a in data["alternatives"]} == {"l4", "h100-sxm"}


@pytest.mark.parametrize(
    "argv",
    [
        ("--price", "l4"),
        ("--price", "l4=cheap"),
        ("--price", "l4=-1"),
        ("--price", "tpu-v5=1"),
        ("--gpu", ","),
    ],
    ids=["no-equals", "not-a-number", "negative", "unknown-product", "empty-list"],
)
def test_bad_choice_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    args = ["plan", "llama-3.1-8b", "--gpu", "any", *argv]
    code = main(args)
    _, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("kvright: error: ") and err.count("\n") == 1 and "Traceback" not in err


#: A GPU where vLLM keeps no fp8 KV cache (``gpus.json``'s ``fp8_kv_cache: false``; every catalog GPU has
#: one since vLLM 0.32 serves it on SM80 through FlashInfer or Triton attention).
NO_FP8_KV = dataclasses.replace(cap.gpu_spec("a100-80gb"), id="no-fp8-kv", fp8_kv_cache=False)


def test_an_input_invalid_on_one_product_is_that_products_reason_not_an_error() -> None:
    """fp8 KV cache pinned: the GPU that cannot keep one says so, the others still compete."""
    choice = cap.choose_gpu(
        LLAMA_8B, [*EVERY_GPU, NO_FP8_KV], WORKLOAD, SLO, cap.Limits(kv_cache_dtype="fp8")
    )
    assert choice.feasible
    old = next(a for a in choice.alternatives if a.gpu.id == "no-fp8-kv")
    assert not old.feasible and "fp8 KV cache" in old.why
    assert next(a for a in choice.alternatives if a.gpu.id == "a100-80gb").feasible


def test_invalid_on_every_product_raises() -> None:
    with pytest.raises(cap.CapacityError, match="fp8 KV cache"):
        cap.choose_gpu(LLAMA_8B, [NO_FP8_KV], WORKLOAD, SLO, cap.Limits(kv_cache_dtype="fp8"))


@pytest.mark.parametrize("model", cap.catalog_ids())
def test_the_choice_is_the_cheapest_feasible_plan_listed(model: str) -> None:
    """Property over the catalog: inside each product the plan takes the fewest GPUs among its feasible
    candidates, and across products the chosen one costs the least among the feasible alternatives."""
    arch = cap.load_architecture(model)
    choice = cap.choose_gpu(
        arch, EVERY_GPU, cap.Workload(max_model_len=4096, concurrency=16), cap.SLO(tpot_seconds=0.100),
        cap.Limits(max_gpus=16),
    )  # fmt: skip
    for alt in choice.alternatives:
        feasible = [c for c in alt.result.candidates if c.feasible]
        if alt.feasible:
            assert alt.gpus == min(c.gpus for c in feasible), (model, alt.gpu.id)
    if choice.chosen is not None:
        cheapest = min(a.usd_per_hour or 0.0 for a in choice.alternatives if a.feasible)
        assert choice.chosen.usd_per_hour == cheapest, model


def test_pcie_all_reduces_go_through_nccl_above_two_gpus() -> None:
    """vLLM's custom all-reduce is off on more than two PCIe-only GPUs: TP 4 on L4 pays NCCL's latency,
    TP 2 on L4 and TP 4 on an NVLink GPU do not."""

    def comm(gpu: str, tp: int) -> float:
        layout = cap.Layout(tensor_parallel_size=tp)
        step = roofline.StepModel(LLAMA_8B, cap.gpu_spec(gpu), layout=layout, kv_cache_dtype="auto")
        return step.comm_fixed

    layers = LLAMA_8B.num_layers
    assert comm("l4", 4) == pytest.approx(2 * layers * roofline.PCIE_ALLREDUCE_LATENCY_SECONDS)
    assert comm("l4", 2) == pytest.approx(2 * layers * roofline.ALLREDUCE_LATENCY_SECONDS)
    assert comm("h100-sxm", 4) == pytest.approx(2 * layers * roofline.ALLREDUCE_LATENCY_SECONDS)
    assert {g.interconnect for g in EVERY_GPU} <= {"nvlink", "xgmi", "pcie"}
    assert all(g.price_usd_per_hour > 0 for g in EVERY_GPU)


def test_a_refusal_names_a_gpu_that_holds_the_workload(capsys: pytest.CaptureFixture[str]) -> None:
    """Llama-3.1-405B does not fit one 8 x H100 node; the refusal says which catalog GPU holds it instead."""
    argv = "plan llama-3.1-405b --gpu h100-sxm --max-model-len 8192 --concurrency 16 --json"
    code = main(shlex.split(argv))
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["feasible"] is False
    holds = data["reason"].split("; ")[-1]
    assert " holds it: " in holds and "/h" in holds, data["reason"]
    named = next(g for g in EVERY_GPU if holds.startswith(g.name))
    assert named.id != "h100-sxm" and cap.plan(
        cap.load_architecture("llama-3.1-405b"), named, cap.Workload(max_model_len=8192, concurrency=16),
        cap.SLO(), cap.Limits(),
    ).feasible  # fmt: skip


@pytest.mark.parametrize(
    ("name", "found"),
    [("mi300", "mi300x"), ("H200", "h200"), ("l4", "l4"), ("NVIDIA-H100-80GB-HBM3", "h100-sxm")],
)
def test_a_gpu_is_named_by_its_id_its_label_or_the_start_of_one_id(name: str, found: str) -> None:
    assert cap.gpu_spec(name).id == found


@pytest.mark.parametrize(
    ("name", "ids"), [("h100", "h100-sxm or h100-pcie"), ("a100", "a100-80gb or a100-40gb")]
)
def test_a_start_that_several_gpus_share_is_refused_naming_them(name: str, ids: str) -> None:
    with pytest.raises(cap.CapacityError, match=f"could be {ids}; name one"):
        cap.gpu_spec(name)
