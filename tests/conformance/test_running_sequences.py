"""Requests running at once in a KV cache of N blocks: real vLLM's scheduler against capacity's sequences().

vLLM 0.32 admits a waiting request only when its whole reservation is free (``allocate_slots`` with
``full_sequence_must_fit``, on by ``scheduler_reserve_full_isl``): every block of the prompt in a
full-attention group, a sliding-window group's capped at its window plus the in-flight tokens. A running
request frees the blocks that fall out of its window (``remove_skipped_blocks``), so in a sliding group it
holds its window's blocks only. capacity models this as ``KVCacheLayout.sequences(blocks, tokens)`` =
``1 + (blocks - 1 - admitted_blocks_per_sequence) // held_blocks_per_sequence`` (the 1: the block pool's
null block); the older per-request rule ``blocks // blocks_per_sequence`` undercounts every model with a
sliding window.

vllm_scheduler_probe.py starts each case's engine from a config.json alone (dummy weights, no tokenizer; one
process, one vLLM import), adds identical-length requests with distinct prompts and steps the real
``Scheduler`` and KV-cache manager with made-up model outputs (no forward pass), counting the most requests
running at once and the blocks each request holds per group. Models: a tiny Llama (full attention), a tiny
Mistral with a window on every layer, a tiny Gemma 3 (one sliding and one full layer) and DeepSeek-V4's
``mixed4`` (four groups of sliding windows of three block sizes and a compressed full group).

Each budget sits midway between two of capacity's steps, so the comparison does not hang on a single
block; one budget of exactly RUNNING requests' blocks shows the null block (a request fewer runs), and the
blocks a request takes when admitted (never more than its own in a sliding group) are compared group by
group.

CPU facts fed to capacity: block size 128 and kernel alignment 128 (the CPU attention backend), in-flight
tokens = max_num_batched_tokens (the CPU platform turns async scheduling off).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

import capacity

from .harness import VllmEnv, offline_engines
from .test_deepseek_v4 import MODELS as DEEPSEEK_V4_MODELS

pytestmark = pytest.mark.conformance

CPU_BLOCK_SIZE = 128
CPU_KERNEL_BLOCK_ALIGNMENT = 128
MAX_NUM_BATCHED_TOKENS = 1024
MAX_MODEL_LEN = 1280
PROMPT_TOKENS = 1000  # well past the 256-token windows, below one batch (no chunked prefill)
MAX_TOKENS = 16
REQUESTS = 16
RUNNING = 12
"""Requests capacity says run at once in each case's budget; REQUESTS leaves some waiting."""

_TINY = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,  # the CPU attention backend's smallest head size
    "vocab_size": 512,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}

MODELS: dict[str, dict[str, Any]] = {
    "llama": _TINY | {"architectures": ["LlamaForCausalLM"], "model_type": "llama"},
    "mistral": _TINY
    | {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 256},
    "gemma3": _TINY
    | {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "sliding_window": 256,
        "layer_types": ["sliding_attention", "full_attention"],
        "query_pre_attn_scalar": 32,
        "rope_local_base_freq": 10000.0,
        "hidden_activation": "gelu_pytorch_tanh",
        "tie_word_embeddings": True,
    },
    "deepseek-v4-mixed4": DEEPSEEK_V4_MODELS["mixed4"],
}
SLIDING = ("mistral", "gemma3", "deepseek-v4-mixed4")


@dataclass(frozen=True)
class Case:
    model: str
    budget: str
    """``mid``: midway between two of capacity's steps; ``edge``: exactly RUNNING requests' blocks, with no
    block left for the pool's null block."""

    @property
    def id(self) -> str:
        return f"{self.model}-{self.budget}"


CASES = [*(Case(m, "mid") for m in MODELS), Case("llama", "edge")]


def _layout(model: str) -> capacity.KVCacheLayout:
    arch = capacity.architecture_from_config(MODELS[model], name=model)
    return capacity.kv_cache_layout(
        arch,
        block_size=CPU_BLOCK_SIZE,
        kernel_block_alignment=CPU_KERNEL_BLOCK_ALIGNMENT,
        max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
        max_in_flight_tokens=MAX_NUM_BATCHED_TOKENS,  # CPU: async scheduling off, one batch in flight
        max_model_len=MAX_MODEL_LEN,
    )


def _blocks(case: Case) -> int:
    """Blocks of the case's budget: capacity's RUNNING requests and the null block, plus half a held
    request's (mid); or RUNNING requests' blocks alone (edge)."""
    layout = _layout(case.model)
    reserve = layout.admitted_blocks_per_sequence(PROMPT_TOKENS)
    held = layout.held_blocks_per_sequence(PROMPT_TOKENS)
    if case.budget == "edge":
        return reserve + (RUNNING - 1) * held
    return 1 + reserve + (RUNNING - 1) * held + held // 2


@pytest.fixture(scope="module")
def runs(vllm_env: VllmEnv, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """vLLM's answer for every case of CASES, by case id (one process for all)."""
    root = tmp_path_factory.mktemp("running-sequences")
    cases = []
    for case in CASES:
        folder = root / case.model
        folder.mkdir(exist_ok=True)
        (folder / "config.json").write_text(json.dumps(MODELS[case.model], indent=1))
        layout = _layout(case.model)
        cases.append(
            {
                "id": case.id,
                "model": str(folder),
                # Not a whole number of blocks: vLLM rounds down as capacity does.
                "kv_cache_memory_bytes": _blocks(case) * layout.bytes_per_block + 1_234,
                "max_model_len": MAX_MODEL_LEN,
                "max_num_batched_tokens": MAX_NUM_BATCHED_TOKENS,
                "max_num_seqs": 2 * REQUESTS,
                "requests": REQUESTS,
                "prompt_tokens": PROMPT_TOKENS,
                "max_tokens": MAX_TOKENS,
            }
        )
    return offline_engines(vllm_env, "vllm_scheduler_probe.py", root, cases)


def _run(runs: dict[str, dict[str, Any]], case: Case) -> dict[str, Any]:
    run = runs[case.id]
    assert run["started"] and run["error"] is None, f"vLLM failed on {case.id}: {run['error']}"
    assert run["finished"] == REQUESTS, run
    return run


def _engine_groups(run: dict[str, Any], key: str) -> list[tuple[str, int, int | None, int]]:
    """(kind, block tokens, window, blocks one request holds by ``key``) of every engine group, sorted."""
    return sorted(
        ("full" if g["sliding_window"] is None else "sliding", g["block_size"], g["sliding_window"], n)
        for g, n in zip(run["groups"], run[key], strict=True)
    )


def _capacity_groups(
    layout: capacity.KVCacheLayout, tokens: int, inflight: int | None
) -> list[tuple[str, int, int | None, int]]:
    """The same from capacity: what a request of ``tokens`` is admitted with (the layout's in-flight tokens)
    or holds running (``inflight`` 0)."""
    return sorted(
        (
            g.kind,
            g.tokens_per_block(layout.block_size),
            g.bound,
            layout.group_blocks(g, tokens, inflight=inflight, admitted=True),
        )
        for g in layout.groups
        for _ in range(g.count)
    )


@pytest.mark.parametrize("model", list(MODELS))
def test_peak_running_requests_match_capacity_sequences(model: str, runs: dict[str, dict[str, Any]]) -> None:
    case = Case(model, "mid")
    run = _run(runs, case)
    layout = _layout(model)
    blocks = run["num_blocks"]
    assert blocks == layout.num_blocks(_blocks(case) * layout.bytes_per_block + 1_234), run
    # Running requests grow by up to MAX_TOKENS while they decode.
    fewest = layout.sequences(blocks, PROMPT_TOKENS + MAX_TOKENS)
    most = layout.sequences(blocks, PROMPT_TOKENS)
    reserve = layout.admitted_blocks_per_sequence(PROMPT_TOKENS)
    held = layout.held_blocks_per_sequence(PROMPT_TOKENS)
    assert most == RUNNING
    assert fewest <= run["peak_running"] <= most, (
        f"vLLM ran {run['peak_running']} at once in {blocks} blocks; capacity {fewest}..{most} "
        f"(reserve {reserve}, held {held}): {run}"
    )
    assert run["preemptions"] == 0, run  # admission alone bounded the batch
    if model in SLIDING:  # the old per-request rule undercounts
        assert blocks // layout.blocks_per_sequence(PROMPT_TOKENS) < run["peak_running"], run
    else:
        assert reserve == held


@pytest.mark.parametrize("model", list(MODELS))
def test_running_request_holds_capacitys_held_blocks(model: str, runs: dict[str, dict[str, Any]]) -> None:
    """Per group: the most blocks a decoding request held (its window's, or all of a full group's) is
    capacity's ``group_blocks(..., inflight=0, admitted=True)`` at its longest."""
    run = _run(runs, Case(model, "mid"))
    layout = _layout(model)
    assert _engine_groups(run, "held_blocks") == _capacity_groups(layout, PROMPT_TOKENS + MAX_TOKENS, 0)


def test_the_null_block_leaves_a_request_out_of_an_exact_budget(runs: dict[str, dict[str, Any]]) -> None:
    """vLLM's BlockPool keeps one of num_blocks as its null block: RUNNING requests' blocks run one fewer."""
    case = Case("llama", "edge")
    run = _run(runs, case)
    layout = _layout("llama")
    assert run["num_blocks"] == RUNNING * layout.blocks_per_sequence(PROMPT_TOKENS)
    assert run["peak_running"] == layout.sequences(run["num_blocks"], PROMPT_TOKENS) == RUNNING - 1, run


@pytest.mark.parametrize("model", SLIDING)
def test_admitted_request_takes_capacitys_reservation(model: str, runs: dict[str, dict[str, Any]]) -> None:
    run = _run(runs, Case(model, "mid"))
    layout = _layout(model)
    assert _engine_groups(run, "admitted_blocks") == _capacity_groups(layout, PROMPT_TOKENS, None)
