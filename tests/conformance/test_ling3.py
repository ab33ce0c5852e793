"""inclusionAI's Ling 3.0 as vLLM's own class builds it and its engine core accounts its cache.

vLLM 0.32 builds ``BailingMoeV3ForCausalLM`` (``bailing_moe_v3.py``) with Kimi Delta Attention on every layer
but the one closing each ``layer_group_size`` group and those of a trailing partial group, which are MLA with
an output gate (per head or per value); routed layers after ``first_k_dense_replace`` dense ones, with a
float32 router and expert bias and shared experts it always builds; an LM head of its own. A KDA layer keeps
a conv state in the model dtype and a float32 recurrent state, and the hybrid block is sized to hold them
over the MLA latent's page. vLLM ships no config class for a text-only checkpoint (it runs the checkpoint's
own, which writes every field), so the probe reads each file through a plain config of its type
(``plain_config``). vllm_weights_probe.py builds each class on the meta device and runs the engine core's
accounting; capacity must give the same parameters, bytes and blocks.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from tests.builders import LING3_SMALL, LING3_WIDE_STATE, edited, model_shapes

from . import harness

pytestmark = pytest.mark.conformance

#: Configs vLLM's class builds, weighed to the byte (the longer ones in tests/data/shapes/ling.json).
_LING = model_shapes("ling")
BUILT: dict[str, dict[str, Any]] = {
    "kda-and-gated-mla": LING3_SMALL,
    "query-lora-elementwise-gate-trailing-mla": edited(
        LING3_SMALL,
        gated_attention_proj_granularity_type="element_wise",
        num_hidden_layers=10,
        q_lora_rank=96,
        first_k_dense_replace=0,
    ),
    "no-shared-expert-groups-of-three": edited(
        LING3_SMALL, num_shared_experts=0, layer_group_size=3, first_k_dense_replace=2
    ),
    "ungated-two-shared-experts": _LING["ungated-two-shared-experts"],
    "every-layer-mla": edited(LING3_SMALL, layer_group_size=1, q_lora_rank=64),
    "tied-with-mtp-every-eighth": edited(
        LING3_SMALL, tie_word_embeddings=True, num_nextn_predict_layers=1, layer_group_size=8
    ),
    "no-experts-short-conv-of-three": edited(
        {**LING3_SMALL, "num_experts": None},  # null, not missing: every layer dense
        num_attention_heads=16,
        num_key_value_heads=16,
        head_dim=16,
        short_conv_kernel_size=3,
    ),
    "wide-state": LING3_WIDE_STATE,
    "class-defaults": _LING["class-defaults"],  # the MLA widths and KDA switches left to the class
}

#: The engine core's accounting of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(
    BUILT,
    [
        "kda-and-gated-mla",
        "query-lora-elementwise-gate-trailing-mla",
        "ungated-two-shared-experts",
        "every-layer-mla",
        "wide-state",
    ],
    memory=2**28,
    length=4096,
    max_num_batched_tokens=4096,
)

#: Files vLLM refuses at build, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "no_kda_lora": edited(LING3_SMALL, no_kda_lora=False),
    "head_dim": edited(LING3_SMALL, head_dim=None),
    "short_conv_kernel_size": edited(LING3_SMALL, short_conv_kernel_size=None),
    "first_k_dense_replace": edited(LING3_SMALL, first_k_dense_replace=None),
    "layer_group_size": edited(LING3_SMALL, layer_group_size=0),
    "moe_shared_expert_intermediate_size": edited(LING3_SMALL, moe_shared_expert_intermediate_size=None),
    "use_bias": edited(LING3_SMALL, use_bias=True, num_shared_experts=0),  # shared experts built all the same
    "num_experts": edited(LING3_SMALL, num_experts=None),  # missing (null: every layer dense)
}


class TestLing3(harness.StoppedAtCacheSetup):
    """Nine builds (each layer kind at its own widths, either gate or none, the KDA's float32 parts, shared
    experts always built, an LM head never tied, the class's defaults), five caches (the hybrid block sized by
    both KDA states, an every-MLA model's too) and eight refusals; and the other model type vLLM's engine
    stops at."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
    STOPPED: ClassVar[dict[str, dict[str, Any]]] = {
        "model_type": edited(LING3_SMALL, model_type="bailing_moe_v3")
    }
    STAND_INS: ClassVar[dict[str, Any]] = {"plain_config": True}
