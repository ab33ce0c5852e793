"""Essential AI's Rnj-1 (vLLM's ``rnj1.py``, ``Rnj1ForCausalLM``) as capacity reads, weighs and caches it, and
the attention backend its plan names.

tests/conformance/test_rnj1.py holds small configs to vLLM's class and engine core at one rank on every run.
The per-rank bytes at TP 2 and 4 and the caches at TP > 1 and with fp8 were measured with vLLM 0.32's class
built on every rank of a TP group (gloo on loopback) before this was written (the CPU build cannot build the
class: the measurement dropped the ``chunk_lookback`` only the Triton backend takes).
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from capacity.errors import ConfigError
from tests.builders import RNJ1_SMALL, cpu_engine_accounting, edited, model_shapes, weight_bytes_by_tp

_RNJ1 = model_shapes("rnj1")
EVERY_LAYER_CHUNKED = _RNJ1["every-layer-chunked"]
WIDE_BIASED = _RNJ1["wide-biased"]


def _mixers(config: dict[str, Any], **changes: Any) -> list[str]:
    return [layer.mixer for layer in c.architecture_from_config(edited(config, **changes)).layers]


def test_only_chunked_layers_keep_a_window_unless_every_layer_says_sliding() -> None:
    assert _mixers(RNJ1_SMALL) == ["sliding", "full", "sliding", "full"]
    assert c.architecture_from_config(RNJ1_SMALL).sliding_window == 128
    # Gemma3TextConfig's pattern (five sliding_attention layers, then a full one): every layer whole.
    whole = c.architecture_from_config(edited(RNJ1_SMALL, num_hidden_layers=6, layer_types=None))
    assert {layer.mixer for layer in whole.layers} == {"full"} and whole.sliding_window is None
    # Every layer sliding_attention (stated, or the pattern below six layers): vLLM's engine window on all.
    assert _mixers(RNJ1_SMALL, layer_types=["sliding_attention"] * 4) == ["sliding"] * 4
    assert _mixers(RNJ1_SMALL, layer_types=None) == ["sliding"] * 4
    assert _mixers(RNJ1_SMALL, layer_types=["chunked_attention"] + ["sliding_attention"] * 3) == [
        "sliding",
        "full",
        "full",
        "full",
    ]


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (RNJ1_SMALL, {1: 5252608, 2: 2631168, 4: 1451520}),
        (edited(RNJ1_SMALL, tie_word_embeddings=False), {1: 5776896, 2: 2893312, 4: 1582592}),
        (EVERY_LAYER_CHUNKED, {1: 19733760, 2: 9968896, 4: 5086464}),  # one KV head whole on each rank
        (WIDE_BIASED, {1: 49342464, 2: 24688640, 4: 12361728}),  # the output bias whole on each rank
        (edited(RNJ1_SMALL, vocab_size=32001, tie_word_embeddings=False), {2: 18785792, 4: 9528832}),
    ],
    ids=["small", "untied", "every-layer-chunked", "wide-biased", "odd-vocab"],
)
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(
    config: dict[str, Any], measured: dict[int, int]
) -> None:
    assert weight_bytes_by_tp(config, measured) == measured


@pytest.mark.parametrize(
    ("config", "measured"),
    [
        (
            RNJ1_SMALL,
            {(1, "auto"): 512, (2, "auto"): 1024, (4, "auto"): 1024, (1, "fp8"): 1024, (2, "fp8"): 2048},
        ),
        (EVERY_LAYER_CHUNKED, {(1, "auto"): 682, (2, "fp8"): 1365}),
        (WIDE_BIASED, {(1, "auto"): 256, (2, "auto"): 512, (4, "auto"): 1024, (2, "fp8"): 1024}),
    ],
    ids=["small", "every-layer-chunked", "wide-biased"],
)
def test_the_pool_holds_as_many_blocks_as_the_engine_core_makes(
    config: dict[str, Any], measured: dict[tuple[int, str], int]
) -> None:
    """Blocks of 64 MiB by TP and KV dtype on vLLM's CPU engine core (128-token blocks, a 2,048-token
    context): the full and windowed groups as the engine groups them."""
    for (tp, dtype), blocks in measured.items():
        block, got, _ = cpu_engine_accounting(
            config, 2**26, 2048, tensor_parallel_size=tp, kv_cache_dtype=dtype
        )
        assert (block, got) == (128, blocks), (tp, dtype)


def test_the_plan_names_the_triton_backend_the_class_runs_on() -> None:
    arch = c.architecture_from_config(edited(RNJ1_SMALL, vocab_size=128256, max_position_embeddings=32768))
    assert arch.attention_backend == "TRITON_ATTN"
    result = c.plan(arch, c.gpu_spec("h100-sxm"), c.Workload(max_model_len=8192), c.SLO(), c.Limits())
    assert result.plan is not None
    args = result.plan.vllm_args()
    assert args[args.index("--attention-backend") + 1] == "TRITON_ATTN"
    gemma = c.architecture_from_config(
        edited(RNJ1_SMALL, architectures=["Gemma3ForCausalLM"], layer_types=None)
    )
    assert gemma.attention_backend is None  # Gemma 3's own class runs on vLLM's default backend


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"hidden_activation": "silu"}, "hidden_activation"),  # "RNJ-1 uses gelu_pytorch_tanh"
        ({"rope_parameters": None}, "rope_parameters"),  # chunked layers without their RoPE entry
        ({"hidden_size": 250}, "num_attention_heads"),  # Gemma3TextConfig's validate_architecture
        ({"model_type": "gemma3"}, "model_type"),
    ],
)
def test_files_the_class_or_its_config_class_refuses_are_refused(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        c.architecture_from_config(edited(RNJ1_SMALL, **changes))
