"""IQuest-Coder's Loop models as vLLM's own class builds them and its engine core accounts their cache.

vLLM 0.32 builds ``IQuestLoopCoderForCausalLM`` (``iquest_loopcoder.py``) as a Llama without biases whose
forward pass runs the whole layer stack ``loop_num`` times (default 2): each layer holds one ``Attention`` a
pass, the first over the whole context, each later one over the last ``loop_window_size`` tokens (default
64), so the engine caches ``layers x loop_num`` attention layers in a full and a sliding-window group; and a
gate projection per layer (``head_dim`` to a logit a query head, with a bias) whatever ``loop_num`` says. Its
heads are ``hidden_size / num_attention_heads`` wide whatever ``head_dim`` the file states. vLLM ships no
config class for the checkpoint (it runs the checkpoint's own), so the probe reads each file through a plain
config of its type (``plain_config``): vLLM's class reads the fields as they stand. vllm_weights_probe.py
builds the class on the meta device and runs the engine core's accounting; capacity must give the same
parameters, bytes, cached layers and blocks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from tests.builders import IQUEST_LOOP_SMALL, edited

from . import harness

pytestmark = pytest.mark.conformance

#: The small config with a vocabulary of whole 64-row shards, so that the file's parameters are vLLM's (an odd
#: vocabulary's padded rows are weighed in tests/unit/test_iquest_loop.py).
SMALL = edited(IQUEST_LOOP_SMALL, vocab_size=1024)

#: Configs vLLM's class builds, weighed to the byte.
BUILT: dict[str, dict[str, Any]] = {
    "two-passes-file-head-dim-ignored": SMALL,
    "tied": edited(SMALL, tie_word_embeddings=True),
    "one-pass-still-gated": edited(SMALL, loop_num=1),
    "three-passes-32-token-window-tied": edited(
        SMALL, loop_num=3, loop_window_size=32, tie_word_embeddings=True
    ),
    "class-defaults": edited(SMALL, loop_num=None, loop_window_size=None),
    "one-kv-head": edited(
        SMALL,
        hidden_size=512,
        intermediate_size=1024,
        num_attention_heads=8,
        num_key_value_heads=1,
        vocab_size=32768,
    ),
    "six-heads-no-head-dim": edited(SMALL, hidden_size=384, num_attention_heads=6, head_dim=None),
    "four-layers-16-token-window": edited(
        SMALL,
        hidden_size=512,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=8,
        loop_window_size=16,
    ),
}

#: The engine core's accounting of them (bytes, max_model_len, max_num_batched_tokens).
ACCOUNTED = harness.accounted_cases(
    BUILT,
    [
        "two-passes-file-head-dim-ignored",
        "one-pass-still-gated",
        "three-passes-32-token-window-tied",
        "one-kv-head",
        "four-layers-16-token-window",
    ],
    memory=2**26,
    length=2048,
)

#: Files vLLM refuses at build, by the field capacity names.
REFUSED: dict[str, dict[str, Any]] = {
    "hidden_act": edited(SMALL, hidden_act="gelu"),  # "Unsupported activation"
    # A window on some layers only (max_window_layers below the layer count): vLLM's class asserts.
    "sliding_window": edited(SMALL, sliding_window=128, max_window_layers=2),
}


class TestIQuestLoop(harness.ModelSuite):
    """Eight builds (one to three passes, the gate projections, heads of the class's width, tied and untied
    heads) and their cached layers, five caches (a full group and one sliding-window group a later pass) and
    two refusals."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
    STAND_INS: ClassVar[dict[str, Any]] = {"plain_config": True}

    def check_built(self, answer: Mapping[str, Any], config: dict[str, Any]) -> None:
        """The bytes, and every pass's attention vLLM built is a layer capacity caches: as many, as many
        heads as wide, the later passes' over their window."""
        arch = harness.weighed_as_built(answer, config)
        built = Counter(
            ("sliding" if a["sliding_window"] else "full", a["kv_heads"], a["head_size"])
            for a in answer["attention"]
        )
        cached = Counter(
            {
                (mixer, kv_heads, head_dim): n
                for (mixer, kv_heads, head_dim, _, _), n in arch.layer_census.items()
            }
        )
        assert cached == built
        windows = {a["sliding_window"] for a in answer["attention"]} - {None}
        assert windows == ({arch.sliding_window} if arch.loop_count > 1 else set())
        assert arch.head_dim == config["hidden_size"] // config["num_attention_heads"]
