"""A prompt prefix every request shares (spec.workload.sharedPrefixTokens, ``kvright plan
--shared-prefix-tokens``): vLLM's prefix caching holds its KV blocks once and prefills it once.

The real planner and serving model over the real catalog; the rule is vLLM 0.32's (block-granular
sharing in full-attention groups only: sliding, chunked and Mamba groups keep a window or a state per
request).
"""

from __future__ import annotations

import json
import re
import shlex

import pytest

import capacity as c
from kvright.api import SpecError, parse_spec
from kvright.cli import main
from kvright.inventory import ProductInventory
from kvright.reconcile import Facts, desire
from tests.builders import llmd

H100 = c.gpu_spec("h100-sxm")
Key = tuple[str, str, int]


def _plan(model: str, shared: int) -> c.PlanResult:
    workload = c.Workload(
        max_model_len=8192,
        prompt_tokens=6000,
        output_tokens=256,
        concurrency=128,
        shared_prefix_tokens=shared,
    )
    return c.plan(c.catalog_architecture(model), H100, workload, c.SLO(tpot_seconds=0.100), c.Limits())


def _seqs(result: c.PlanResult) -> dict[Key, int]:
    """max-num-seqs of every candidate, by layout, KV dtype and batched tokens."""
    return {
        (x.layout.label, x.kv_cache_dtype, x.max_num_batched_tokens): x.max_num_seqs
        for x in result.candidates
    }


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen3-8b", "gemma-3-27b", "mistral-7b"])
def test_a_shared_prefix_lowers_ttft_and_never_costs_sequences(model: str) -> None:
    alone, shared = _plan(model, 0), _plan(model, 4096)
    assert alone.feasible and shared.feasible, (alone.reason, shared.reason)
    assert alone.prediction is not None and shared.prediction is not None
    assert shared.prediction.ttft_seconds < alone.prediction.ttft_seconds
    assert shared.plan is not None and alone.plan is not None and shared.plan.gpus <= alone.plan.gpus
    # Candidate by candidate (layout, KV dtype, batched tokens) the prefix never costs a sequence.
    before, after = _seqs(alone), _seqs(shared)
    fewer = [(key, n, after[key]) for key, n in before.items() if after[key] < n]
    assert not fewer, fewer
    assert any(after[key] > n for key, n in before.items())


def test_only_whole_blocks_of_full_attention_layers_are_shared() -> None:
    dense = c.kv_cache_layout(c.catalog_architecture("llama-3.1-8b"))
    assert dense.shared_blocks(4096) == dense.blocks_per_sequence(4096)  # every layer attends in full
    assert dense.shared_blocks(4096 + 15) == dense.shared_blocks(4096)  # a partial block is not shared
    assert dense.shared_blocks(0) == 0
    hybrid = c.kv_cache_layout(c.catalog_architecture("gemma-3-27b"))  # 5 sliding layers per full one
    assert 0 < hybrid.shared_blocks(4096) < hybrid.blocks_per_sequence(4096)


def test_the_cached_prefix_is_whole_blocks_of_the_layouts_own_block_size() -> None:
    """A Gated-DeltaNet hybrid raises vLLM's block size far above 16 tokens to hold a state per block, so
    a 3000-token prefix is cached in fewer tokens than 16-token blocks would suggest."""
    dense = c.kv_cache_layout(c.catalog_architecture("llama-3.1-8b"))
    assert dense.cached_prefix_tokens(3000) == 3000 // 16 * 16
    hybrid = c.kv_cache_layout(c.catalog_architecture("qwen3.5-397b-a17b"))
    assert hybrid.block_size > 16
    assert hybrid.cached_prefix_tokens(3000) == 3000 // hybrid.block_size * hybrid.block_size
    assert hybrid.cached_prefix_tokens(hybrid.block_size - 1) == 0


def test_status_states_the_hit_rate_the_prefix_cache_can_reach() -> None:
    def hit(model: str) -> float:
        spec = (
            llmd("chat").model(model).gpu("NVIDIA-H200").context(8192, 4000, 256).shared_prefix(3000).spec()
        )
        product = ProductInventory(product="NVIDIA-H200", nodes=2, max_gpus_per_node=8, total_gpus=16)
        d = desire(
            Facts(
                name="chat",
                namespace="ml",
                uid="u",
                generation=1,
                spec=spec,
                current_status={},
                architecture=c.catalog_architecture(model),
                inventory={product.product: product},
                default_image="vllm/vllm-openai:test",
            )
        )
        assert d.plan_feasible.status == "True", d.plan_feasible.message
        return float(d.fields["prediction"]["prefixCacheHitPercent"])

    assert hit("llama-3.1-8b") == round(100 * (3000 // 16 * 16) / 4000, 1)
    block = c.kv_cache_layout(c.catalog_architecture("qwen3-next-80b-a3b"), tensor_parallel_size=1).block_size
    assert block > 16 and hit("qwen3-next-80b-a3b") < hit("llama-3.1-8b")


def test_more_sequences_fit_when_their_prefix_is_held_once() -> None:
    memory = c.KVMemory(c.catalog_architecture("llama-3.1-8b"), H100, c.EngineConfig(layout=c.Layout()))
    alone = memory.max_batch(8192, 1024)
    shared = memory.max_batch(8192, 1024, shared_prefix_tokens=6144)
    assert shared > 3 * alone  # each sequence now holds a quarter of its blocks, plus one shared copy
    blocks_each = memory.blocks_per_sequence(8192) - memory.layout.shared_blocks(6144)
    assert memory.layout.shared_blocks(6144) + shared * blocks_each <= memory.blocks(shared)


@pytest.mark.parametrize(
    ("workload", "text"),
    [
        (
            {"prompt_tokens": 1000, "output_tokens": 1, "shared_prefix_tokens": 1001},
            "exceed the prompt (1000)",
        ),
        ({"shared_prefix_tokens": -1}, "expected an integer >= 0"),
        ({"max_model_len": 4096, "shared_prefix_tokens": 5000}, "exceed max-model-len 4096"),
    ],
    ids=["longer-than-the-prompt", "negative", "longer-than-the-context"],
)
def test_a_prefix_that_cannot_be_is_refused(workload: dict[str, int], text: str) -> None:
    arch = c.catalog_architecture("llama-3.1-8b")
    with pytest.raises(c.CapacityError, match=re.escape(text)):
        c.plan(arch, H100, c.Workload(**workload), c.SLO(), c.Limits())


def test_the_spec_refuses_a_prefix_longer_than_the_prompt() -> None:
    spec = llmd("a").model("llama-3.1-8b").context(8192, 1000, 100).shared_prefix(2000).spec()
    with pytest.raises(SpecError) as refused:
        parse_spec(spec)
    assert "workload.sharedPrefixTokens must be <= workload.promptTokens" in str(refused.value)
    assert "2000 > 1000" in str(refused.value)


def test_the_cli_takes_the_shared_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    base = shlex.split("plan llama-3.1-8b --gpu h100-sxm --tensor-parallel-size 1 --max-model-len 8192")
    base += ["--prompt-tokens", "6000", "--output-tokens", "256", "--concurrency", "64", "--tpot-ms", "100"]

    def plan(*extra: str) -> dict[str, object]:
        assert main([*base, "--json", *extra]) == 0
        data: dict[str, object] = json.loads(capsys.readouterr().out)
        return data

    alone, shared = plan(), plan("--shared-prefix-tokens", "4096")
    assert shared["predicted"]["ttft_seconds"] < alone["predicted"]["ttft_seconds"]  # type: ignore[index]
    assert shared["plan"]["max_num_seqs"] >= alone["plan"]["max_num_seqs"]  # type: ignore[index]
