"""inclusionAI's Ling 2.5 / Ring 2.5 as vLLM's own class builds it and its engine core accounts its cache.

vLLM 0.32 builds ``BailingMoeV2_5ForCausalLM`` (``bailing_moe_linear.py``) with Lightning linear attention on
every layer but each ``layer_group_size``-th, which is MLA; routed layers of Bailing's MoE (a float32 router
and expert bias, shared experts as one MLP) after ``first_k_dense_replace`` dense ones; an LM head of its own
whatever the file says. A Lightning layer keeps one ``heads x head_dim x head_dim`` state in the model dtype,
and the hybrid block is sized to hold it over the MLA latent's page (even where every layer is MLA).
vLLM ships no config class for the checkpoint (it runs the checkpoint's own, which writes every field), so
the probe reads each file through a plain config of its type (``plain_config``): vLLM's class reads the
fields as they stand. vllm_weights_probe.py builds each class on the meta device and runs the engine core's
accounting; capacity must give the same parameters, bytes and blocks.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

import capacity
from tests.builders import LING25_SMALL, LING25_WIDE_STATE, edited, model_shapes

from . import harness

pytestmark = pytest.mark.conformance


#: Configs vLLM's class builds, weighed to the byte (the longer ones in tests/data/shapes/ling.json).
_LING = model_shapes("ling")
BUILT: dict[str, dict[str, Any]] = {
    "lightning-and-mla": LING25_SMALL,
    "query-lora-every-eighth-mla-no-shared-tied": edited(
        LING25_SMALL,
        q_lora_rank=96,
        layer_group_size=8,
        num_shared_experts=0,
        first_k_dense_replace=2,
        tie_word_embeddings=True,
    ),
    "every-other-mla-no-qk-norm-bf16-router": _LING["every-other-mla-no-qk-norm-bf16-router"],
    "biases-no-shared-trailing-linear-layers": edited(
        LING25_SMALL, use_bias=True, num_shared_experts=0, num_hidden_layers=10, head_dim=None
    ),
    "every-layer-mla": edited(LING25_SMALL, layer_group_size=1, q_lora_rank=64),
    "softmax-without-bias-eight-norm-groups": _LING["softmax-without-bias-eight-norm-groups"],
    "qkv-bias-no-mla": edited(LING25_SMALL, use_qkv_bias=True, layer_group_size=0, num_hidden_layers=6),
    "wide-state": LING25_WIDE_STATE,
    "every-layer-mla-wide-state": edited(LING25_WIDE_STATE, layer_group_size=1),
}

#: The engine core's accounting of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(
    BUILT,
    [
        "lightning-and-mla",
        "query-lora-every-eighth-mla-no-shared-tied",
        "every-other-mla-no-qk-norm-bf16-router",
        "every-layer-mla",
        "wide-state",
        "every-layer-mla-wide-state",
    ],
    memory=2**28,
    length=4096,
    max_num_batched_tokens=4096,
)

#: Files vLLM refuses at build, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "score_function": edited(LING25_SMALL, score_function="softmax"),  # softmax with the expert bias
    "use_bias": edited(LING25_SMALL, use_bias=True),  # a bias with shared experts
    "use_qkv_bias": edited(LING25_SMALL, use_qkv_bias=None),
    "num_shared_experts": edited(LING25_SMALL, num_shared_experts=None),
    "max_position_embeddings": edited(LING25_SMALL, max_position_embeddings=None),
}

#: An FP8 checkpoint in 128 x 128 weight blocks (compressed-tensors), with widths whole blocks.
FP8_BLOCKS = _LING["ling25-fp8-blocks"]


class TestLing25(harness.StoppedAtCacheSetup):
    """Nine builds (each layer kind at its own widths, the Lightning layers' biases, norms and gates split as
    vLLM splits them, the router and its bias in float32, an LM head never tied), six caches (the hybrid
    block sized by the state, every-MLA models included) and five refusals; the other model type vLLM's
    engine stops at, and an FP8 checkpoint."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
    STOPPED: ClassVar[dict[str, dict[str, Any]]] = {
        "model_type": edited(LING25_SMALL, model_type="bailing_moe_v2_5")
    }
    PROBED: ClassVar[dict[str, dict[str, Any]]] = {"fp8-blocks": FP8_BLOCKS}
    STAND_INS: ClassVar[dict[str, Any]] = {"plain_config": True}

    def test_an_fp8_block_checkpoint_weighs_what_vllm_builds(
        self, vllm_answers: dict[str, dict[str, Any]]
    ) -> None:
        # Scales are amortized over the weights they cover (a part-block's scale counted as a fraction).
        answer = vllm_answers["built:fp8-blocks"]
        assert answer["error"] is None, answer
        arch = capacity.architecture_from_config(FP8_BLOCKS)
        assert arch.weights.method != "none"
        assert arch.weight_groups.total == pytest.approx(answer["bytes"], rel=1e-6), answer["own_dtypes"]
        assert answer["own_dtypes"]["model.layers.mlp.gate.weight:float32"] > 0  # the router left whole
