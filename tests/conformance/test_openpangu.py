"""Huawei's openPangu Embedded, Ultra MoE and Pro MoE V2 as vLLM's own class builds them and its engine core
accounts their caches.

vLLM 0.32 builds ``PanguEmbeddedForCausalLM``, ``PanguUltraMoEForCausalLM`` and ``PanguProMoEV2ForCausalLM``
(``openpangu.py``, one code for all three; the config classes are the checkpoint's code, so the probe
registers a plain config of the type, ``plain_config``) with the kind of attention and MLP the file's fields
select. Embedded's GQA attention: the output projection biased by ``attention_bias`` or ``bias``, Q/K/V by
``qkv_bias`` where the file states it, else by the same, the MLP by ``mlp_bias``; ``sandwich_norm`` adds two
norms a layer; ``interleaved_sliding_window`` windows every layer (an integer) or the layers by their index
modulo its length (a list, null a full layer). Ultra MoE: DeepSeek-V3's MLA and MoE fields, a float32
score-correction bias with ``router_enable_expert_bias``, sandwich norms, the class refusing a model without a
routed layer. Pro MoE V2: sink attention where ``param_sink_number`` is above 0 (keys ``qk_nope_dim +
qk_rope_dim`` wide, values ``v_channels`` wide, a ``k_layernorm``, the learned sink keys and, with
``param_sink_with_value``, values), Embedded's GQA where it is 0, Ultra MoE's routed layers (built with the
probe's ``pangu_sink_stand_in``: the sink tensors made on the meta device). vllm_weights_probe.py builds the
classes on the meta device and runs the engine core's accounting; capacity must give the same parameters,
bytes, windows and blocks. The per-rank bytes at TP 2, measured on both ranks, and the released models' are
held in tests/unit/test_openpangu.py and tests/unit/test_pangu_pro_moe_v2.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from tests.builders import PANGU_EMBEDDED_SMALL, PANGU_PRO_SMALL, PANGU_ULTRA_SMALL, edited, model_shapes

from . import harness

pytestmark = pytest.mark.conformance

#: Embedded configs vLLM's class builds, weighed to the byte.
BUILT: dict[str, dict[str, Any]] = {
    "biased-by-bias": PANGU_EMBEDDED_SMALL,
    "no-bias-tied": edited(PANGU_EMBEDDED_SMALL, bias=False, tie_word_embeddings=True),
    "qkv-bias-off-output-biased": edited(PANGU_EMBEDDED_SMALL, qkv_bias=False),
    "attention-bias-alone": edited(PANGU_EMBEDDED_SMALL, bias=False, attention_bias=True),
    "mlp-bias-sandwich-norms": edited(PANGU_EMBEDDED_SMALL, mlp_bias=True, sandwich_norm=True),
    "head-dim-stated": edited(PANGU_EMBEDDED_SMALL, head_dim=32),
    "one-window-every-layer": edited(PANGU_EMBEDDED_SMALL, interleaved_sliding_window=256),
    "windows-by-layer": edited(
        PANGU_EMBEDDED_SMALL, num_hidden_layers=4, interleaved_sliding_window=[256, None]
    ),
}

#: The engine core's accounting of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(BUILT, list(BUILT), memory=2**26, length=2048)

#: Files vLLM refuses, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "num_key_value_heads": edited(PANGU_EMBEDDED_SMALL, num_key_value_heads=3),  # heads % KV heads
    "hidden_act": edited(PANGU_EMBEDDED_SMALL, hidden_act="gelu"),  # check_ffn_act_fn: silu alone
}


class TestPanguEmbedded(harness.LayerCachesSuite):
    """Eight builds (every bias rule, sandwich norms, a stated head width, windows), their caches and two
    refusals."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
    STAND_INS: ClassVar[dict[str, Any]] = {"plain_config": True}


#: Ultra MoE configs vLLM's class builds, weighed to the byte.
ULTRA_BUILT: dict[str, dict[str, Any]] = {
    "one-dense-layer-query-lora": PANGU_ULTRA_SMALL,
    "no-query-lora": edited(PANGU_ULTRA_SMALL, q_lora_rank=None),
    "expert-bias": edited(PANGU_ULTRA_SMALL, router_enable_expert_bias=True),
    "sandwich-norms": edited(PANGU_ULTRA_SMALL, sandwich_norm=True),
    "two-shared-experts": edited(PANGU_ULTRA_SMALL, n_shared_experts=2),
    # the key stated null (the class reads it, null: no shared expert)
    "no-shared-expert-every-layer-routed": PANGU_ULTRA_SMALL
    | {"n_shared_experts": None, "first_k_dense_replace": 0},
    "wider-latent-tied": model_shapes("openpangu")["wider-latent-tied"],
}


class TestPanguUltraMoE(harness.ModelSuite):
    """Seven builds (query LoRA or not, the expert bias, sandwich norms, shared experts, every layer routed, a
    wider latent), their caches, and the files the class refuses: without a routed layer, and without
    ``n_shared_experts`` (read with no default; stated null it is built, above)."""

    BUILT = ULTRA_BUILT
    ACCOUNTED = harness.accounted_cases(ULTRA_BUILT, list(ULTRA_BUILT), memory=2**26, length=2048)
    REFUSED: ClassVar[dict[str, dict[str, Any]]] = {
        "first_k_dense_replace": edited(PANGU_ULTRA_SMALL, first_k_dense_replace=3),  # "No MOE layer found"
        "n_shared_experts": edited(PANGU_ULTRA_SMALL, n_shared_experts=None),  # the key missing
    }
    STAND_INS: ClassVar[dict[str, Any]] = {"plain_config": True}


#: Pro MoE V2 configs vLLM's class builds, weighed to the byte.
PRO_BUILT: dict[str, dict[str, Any]] = {
    "sink-keys-and-values": PANGU_PRO_SMALL,
    "sink-keys-alone-wider-keys": edited(PANGU_PRO_SMALL, param_sink_with_value=False, qk_nope_dim=24),
    "biased-four-kv-heads-no-sandwich": edited(
        PANGU_PRO_SMALL, bias=True, num_key_value_heads=4, sandwich_norm=False
    ),
    "128-sinks-windows-ignored-no-expert-bias": edited(
        PANGU_PRO_SMALL,
        param_sink_number=128,
        interleaved_sliding_window=[256, None, None],
        router_enable_expert_bias=False,
    ),
    "no-sinks-plain-gqa": edited(PANGU_PRO_SMALL, param_sink_number=0),
    "128-sinks-tied": model_shapes("openpangu")["pro-sink-128-tied"],
}

#: The engine core's accounting of those whose sinks fill whole 128-token blocks (the CPU engine's block):
#: with any other count capacity refuses the layout, for vLLM's KV managers assert it after this accounting.
PRO_ACCOUNTED = harness.accounted_cases(
    PRO_BUILT,
    ["no-sinks-plain-gqa", "128-sinks-tied", "128-sinks-windows-ignored-no-expert-bias"],
    memory=2**26,
    length=2048,
)


class TestPanguProMoEV2(harness.LayerCachesSuite):
    """Six builds (sink keys with and without values, wider keys and values, biases, four KV heads, windows
    the sink cache ignores, no sinks, the head tied), three caches, and the files the class refuses: without
    a routed layer, and with an MLP activation other than silu."""

    BUILT = PRO_BUILT
    ACCOUNTED = PRO_ACCOUNTED
    REFUSED: ClassVar[dict[str, dict[str, Any]]] = {
        "first_k_dense_replace": edited(PANGU_PRO_SMALL, first_k_dense_replace=3),  # "No MOE layer found"
        "hidden_act": edited(PANGU_PRO_SMALL, hidden_act="gelu"),  # OpenPanguMoE's check_ffn_act_fn
    }
    STAND_INS: ClassVar[dict[str, Any]] = {"plain_config": True, "pangu_sink_stand_in": True}

    def check_built(self, answer: Mapping[str, Any], config: dict[str, Any]) -> None:
        """Every attention module caches the KV heads, key width and value width capacity reads its layer to
        cache (FlashAttention DiffKV's two widths with sinks). A sink layer's module records the file's
        window, but its cache is a SinkFullAttentionSpec, full attention (the accounted blocks show it):
        capacity reads every such layer full; without sinks, Embedded's windows by layer."""
        arch = harness.weighed_as_built(answer, config)
        layers = [layer for layer in arch.layers if layer.mixer in ("full", "sliding")]
        ours = [(arch.kv_heads_of(x), arch.head_dim_of(x), arch.v_head_dim_of(x)) for x in layers]
        theirs = [(m["kv_heads"], m["head_size"], m["head_size_v"]) for m in answer["attention"]]
        assert ours == theirs
        if config.get("param_sink_number"):
            assert all(layer.mixer == "full" for layer in layers)
        else:
            assert harness.attention_caches(arch) == harness.attention_caches_built(answer)
