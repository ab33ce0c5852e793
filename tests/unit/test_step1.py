"""StepFun's Step1 (vLLM's ``step1.py``, ``Step1ForCausalLM``) as capacity reads, weighs, caches and plans it.

tests/conformance/test_step1.py holds small configs to vLLM's class and engine core at one rank on every run.
The per-rank bytes and caches at TP 2, and the refusal there, were measured with vLLM 0.32's class built on
both ranks of a TP group (gloo on loopback) before this was written; both ranks held the same bytes. kvright
read the class as a standard decoder before: KV heads from ``num_key_value_heads`` (or all of them), a
``head_dim`` vLLM ignores, an untied head, no biases, 4 to 8 times too few KV blocks on these files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import capacity as c
from kvright.cli import main
from tests.builders import STEP1_SMALL, cpu_engine_accounting, edited, model_shapes, weight_bytes_by_tp

#: The surveyed small configs: a 512-token vocabulary.
SMALL = edited(STEP1_SMALL, vocab_size=512)
#: Step-Audio's 3B language model's shape (tests/data/shapes/step1.json).
STEP1_3B = model_shapes("step1")["3b"]


def test_kv_heads_come_from_the_groups_and_heads_split_the_hidden_width() -> None:
    a = c.architecture_from_config(edited(SMALL, num_key_value_heads=4, head_dim=64))
    assert (a.num_kv_heads, a.head_dim) == (2, 32)
    assert a.tie_word_embeddings and a.attention_backend == "TRITON_ATTN"
    assert c.architecture_from_config(edited(SMALL, num_attention_groups=None)).num_kv_heads == 1


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (SMALL, {1: 2_492_928, 2: 1_247_744}),
        (edited(SMALL, tie_word_embeddings=False), {1: 2_755_072, 2: 1_378_816}),
        (edited(SMALL, num_attention_groups=None, num_key_value_heads=4), {1: 2_624_000, 2: 1_313_280}),
        (edited(SMALL, num_attention_groups=None), {1: 2_427_392, 2: 1_247_744}),
        (
            edited(SMALL, attention_bias=True, mlp_bias=True, tie_word_embeddings=False),
            {1: 2_762_752, 2: 1_383_680},
        ),
        (
            edited(SMALL, hidden_size=384, num_attention_heads=12, num_attention_groups=4),
            {1: 4_329_216, 2: 2_166_528},
        ),
        (STEP1_3B, {1: 6_600_136_704, 2: 3_300_268_032}),
    ],
    ids=[
        "small",
        "untied",
        "kv-heads-without-groups",
        "one-kv-head-replicated",
        "biases",
        "twelve-heads",
        "3b",
    ],
)
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(
    config: dict[str, Any], measured: dict[int, int]
) -> None:
    """One KV head is whole on both ranks of TP 2; the output projection's and the down projection's biases
    are whole on every rank."""
    assert weight_bytes_by_tp(config, measured) == measured


@pytest.mark.parametrize(
    ("config", "tp", "measured"),
    [
        (SMALL, 1, (128, 1024)),
        (SMALL, 2, (128, 2048)),
        (edited(SMALL, num_attention_groups=None, num_key_value_heads=4), 1, (128, 512)),
        (edited(SMALL, num_attention_groups=None), 1, (128, 2048)),
        (edited(SMALL, num_attention_groups=None), 2, (128, 2048)),
    ],
    ids=["small", "small-tp2", "four-kv-heads", "one-kv-head", "one-kv-head-tp2"],
)
def test_the_engine_core_blocks_its_cache_as_measured(
    config: dict[str, Any], tp: int, measured: tuple[int, int]
) -> None:
    """(Block size, blocks of 64 MiB at 2,048 tokens): one KV head does not shrink with TP."""
    block, blocks, _ = cpu_engine_accounting(config, 2**26, 2048, tensor_parallel_size=tp)
    assert (block, blocks) == measured


def test_tp_must_split_the_groups_or_replicate_them_whole() -> None:
    """Six heads over three groups at TP 2: vLLM's QKV projection asserts (measured); four groups split."""
    a = c.architecture_from_config(
        edited(SMALL, hidden_size=384, num_attention_heads=6, num_attention_groups=3)
    )
    error = c.tensor_parallel_error(a, 2)
    assert error is not None and "3 KV heads" in error
    assert c.tensor_parallel_error(a, 1) is None
    twelve = edited(SMALL, hidden_size=384, num_attention_heads=12, num_attention_groups=4)
    assert c.tensor_parallel_error(c.architecture_from_config(twelve), 2) is None


def test_the_plan_names_the_triton_attention_backend_alibi_sqrt_needs() -> None:
    """vLLM picks its attention backend before the layer asks for ``use_alibi_sqrt``, then stops unless the
    backend is Triton's: the flag is in the plan's arguments."""
    result = c.plan(
        c.architecture_from_config(STEP1_3B, name="step-audio-3b"),
        c.gpu_spec("h100-sxm"),
        c.Workload(max_model_len=8192),
        c.SLO(tpot_seconds=0.02),
        c.Limits(),
    )
    assert result.plan is not None
    args = result.plan.vllm_args()
    assert args[args.index("--attention-backend") + 1] == "TRITON_ATTN"


def test_the_cli_names_the_backend_and_passes_it_to_vllm(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`kvright plan` says why the flag is there, and its server args carry it."""
    folder = tmp_path / "step-audio-3b"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(STEP1_3B))
    assert main(["plan", str(folder / "config.json"), "--gpu", "h100-sxm", "--max-model-len", "8192"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"attention backend\s+TRITON_ATTN \(the model's layers run on it alone\)", out), out
    assert re.search(r"vllm args \(server\).*--attention-backend TRITON_ATTN", out), out
