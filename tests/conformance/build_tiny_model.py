"""Build one tiny, randomly initialised Llama checkpoint with a locally trained tokenizer.

Runs in the vLLM venv's python (torch, transformers and tokenizers live there, not in kvright's
venv). No hub access: the config, weights and tokenizer are all made here.

    python build_tiny_model.py OUT_DIR '{"num_hidden_layers": 2, "num_attention_heads": 4, ...}'

The JSON holds LlamaConfig fields. The checkpoint is written to a sibling temporary folder and
renamed into place, so a half-built model is never seen under OUT_DIR.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

# Words for the tokenizer's training corpus; any text works, the model's weights are random.
_TEXT = (
    "the a kv cache block token head layer tensor parallel rank batch decode prefill memory "
    "bandwidth latency throughput request queue model weight byte attention query key value "
    "group shared sequence context length budget plan replica gpu cpu engine scheduler "
    "zero one two three four five six seven eight nine ten hundred thousand"
)
_WORDS = _TEXT.split()


def _corpus(lines: int) -> list[str]:
    out = []
    for i in range(lines):
        n = 6 + i % 11
        out.append(" ".join(_WORDS[(i * 7 + j * 13) % len(_WORDS)] for j in range(n)) + f" {i}.")
    return out


def build(out_dir: str, fields: dict[str, object]) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab_size = int(fields["vocab_size"])  # type: ignore[call-overload]
    specials = ["<unk>", "<s>", "</s>", "<pad>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(2000), trainer=trainer)
    assert tok.get_vocab_size() <= vocab_size, (tok.get_vocab_size(), vocab_size)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        model_max_length=int(fields["max_position_embeddings"]),  # type: ignore[call-overload]
    )

    config = LlamaConfig(
        bos_token_id=tok.token_to_id("<s>"),
        eos_token_id=tok.token_to_id("</s>"),
        pad_token_id=tok.token_to_id("<pad>"),
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
        **fields,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)

    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".building-", dir=parent)
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        fast.save_pretrained(tmp)
        # Make sure the dtype vLLM reads is bf16 whatever this transformers version writes.
        cfg_path = os.path.join(tmp, "config.json")
        with open(cfg_path) as f:
            cfg = json.load(f)
        cfg["torch_dtype"] = "bfloat16"
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
        try:
            os.rename(tmp, out_dir)
        except OSError:
            if not os.path.isfile(os.path.join(out_dir, "config.json")):  # lost a race to nobody
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: build_tiny_model.py OUT_DIR CONFIG_JSON")
    build(sys.argv[1], json.loads(sys.argv[2]))
    print(sys.argv[1])
