"""Build one tiny, randomly initialised checkpoint (Llama unless told) with a locally trained tokenizer.

Runs in the vLLM venv's python (torch, transformers and tokenizers live there, not in kvright's
venv). No hub access: the config, weights and tokenizer are all made here.

    python build_tiny_model.py OUT_DIR '{"num_hidden_layers": 2, "num_attention_heads": 4, ...}'

The JSON holds config fields: LlamaConfig's by default, or those of the transformers config class
named by an optional "model_type" (gemma3_text, qwen3_next, nemotron_h, ...: any model type
transformers' AutoConfig knows, saved with AutoModelForCausalLM). An optional "_quantize" entry,
{"method": "gptq" | "awq", "bits": 4, "group_size": 32} or {"method": "fp8", "weight_block_size":
[128, 128]}, rewrites every decoder-layer Linear into
that checkpoint layout (random packed integers and scales of the right shapes, a
`quantization_config` in config.json); embeddings, norms and lm_head stay bf16. An optional "_as_published"
object rewrites fields of the saved config.json the way a publisher's file states them (a null removes the
field): transformers writes what its config class derived, e.g. `layer_types`, which many real files leave
for the class to derive at load time. The checkpoint is
written to a sibling temporary folder and renamed into place, so a half-built model is never seen
under OUT_DIR.
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


# Linear layers the quantized layouts rewrite (the names vLLM's Llama/Qwen loaders map).
_QUANTIZED_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _quantize(
    state: dict[str, object], spec: dict[str, object]
) -> tuple[dict[str, object], dict[str, object]]:
    """State dict rewritten into a GPTQ, AWQ or block-FP8 layout, and its `quantization_config`.

        GPTQ (AutoGPTQ, sym, no act-order): qweight int32 [in / pack, out], qzeros int32
        [in / group, out / pack], scales fp16 [in / group, out], g_idx int32 [in].
        AWQ (GEMM): qweight int32 [in, out / pack], qzeros int32 [in / group, out / pack],
        scales fp16 [in / group, out]. pack = 32 / bits values per int32; torch Linear weights are
        [out, in].
        FP8 (DeepSeek / Qwen3-FP8 style, `weight_block_size` [128, 128]): weight float8_e4m3fn
        [out, in], weight_scale_inv float32 [cdiv(out, block_n), cdiv(in, block_k)]. MoE routers
        (`mlp.gate`) are not among the rewritten names, as in the published FP8 checkpoints; weights of
    modules whose names contain one of the optional "ignore" substrings stay bf16 and are listed in
    `ignored_layers`.
    """
    import torch

    method = str(spec["method"])
    if method == "fp8":
        block_n, block_k = (int(b) for b in spec.get("weight_block_size", (128, 128)))  # type: ignore[attr-defined]
        # Module-name substrings kept in bf16 and listed in `ignored_layers` (exact names, as the
        # published checkpoints list them).
        keep = [str(k) for k in spec.get("ignore", ())]  # type: ignore[attr-defined]
        ignored: list[str] = []
        fp8: dict[str, object] = {}
        for name, tensor in state.items():
            module, _, leaf = name.rpartition(".")
            if leaf == "weight" and any(k in module for k in keep):
                ignored.append(module)
                fp8[name] = tensor
                continue
            if leaf != "weight" or module.rpartition(".")[2] not in _QUANTIZED_LINEARS:
                fp8[name] = tensor
                continue
            assert isinstance(tensor, torch.Tensor)
            n_out, n_in = tensor.shape
            fp8[name] = tensor.to(torch.float8_e4m3fn)
            rows, cols = -(-n_out // block_n), -(-n_in // block_k)
            fp8[f"{module}.weight_scale_inv"] = torch.ones(rows, cols, dtype=torch.float32)
        return fp8, {
            "quant_method": "fp8",
            "activation_scheme": "dynamic",
            "fmt": "e4m3",
            "weight_block_size": [block_n, block_k],
            **({"ignored_layers": sorted(ignored)} if ignored else {}),
        }
    bits = int(spec.get("bits", 4))  # type: ignore[call-overload]
    group = int(spec.get("group_size", 32))  # type: ignore[call-overload]
    pack = 32 // bits
    # Every packed value is the midpoint (zero point 2**(bits-1)) plus noise from random qweights.
    mid = 2 ** (bits - 1)
    zero_word = 0
    for i in range(pack):
        zero_word |= mid << (bits * i)
    zero_word = zero_word - 2**32 if zero_word >= 2**31 else zero_word
    gen = torch.Generator().manual_seed(0)
    out: dict[str, object] = {}
    for name, tensor in state.items():
        module, _, leaf = name.rpartition(".")
        if leaf != "weight" or module.rpartition(".")[2] not in _QUANTIZED_LINEARS:
            out[name] = tensor
            continue
        assert isinstance(tensor, torch.Tensor)
        n_out, n_in = tensor.shape
        assert n_in % group == 0 and n_out % pack == 0 and n_in % pack == 0, (name, tensor.shape)
        scales = (torch.rand(n_in // group, n_out, generator=gen) * 0.002 + 0.001).to(torch.float16)
        qzeros = torch.full((n_in // group, n_out // pack), zero_word, dtype=torch.int32)
        low, high = -(2**31), 2**31 - 1
        if method == "gptq":
            qweight = torch.randint(low, high, (n_in // pack, n_out), generator=gen, dtype=torch.int32)
            out[f"{module}.g_idx"] = torch.arange(n_in, dtype=torch.int32) // group
        elif method == "awq":
            qweight = torch.randint(low, high, (n_in, n_out // pack), generator=gen, dtype=torch.int32)
        else:
            raise SystemExit(f"unknown _quantize method {method!r}")
        out[f"{module}.qweight"] = qweight
        out[f"{module}.qzeros"] = qzeros
        out[f"{module}.scales"] = scales
    if method == "gptq":
        config = {"quant_method": "gptq", "bits": bits, "group_size": group, "desc_act": False, "sym": True}
    else:
        config = {
            "quant_method": "awq",
            "bits": bits,
            "group_size": group,
            "zero_point": True,
            "version": "gemm",
        }
    return out, config


def build(out_dir: str, fields: dict[str, object]) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

    fields = dict(fields)
    model_type = str(fields.pop("model_type", "llama"))
    quantize = fields.pop("_quantize", None)
    as_published = fields.pop("_as_published", {})
    assert isinstance(as_published, dict)

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

    base = {
        "bos_token_id": tok.token_to_id("<s>"),
        "eos_token_id": tok.token_to_id("</s>"),
        "pad_token_id": tok.token_to_id("<pad>"),
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    config = AutoConfig.for_model(model_type, **(base | fields))  # a field stated here wins
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).to(torch.bfloat16)

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
        for key, value in as_published.items():
            if value is None:
                cfg.pop(key, None)
            else:
                cfg[key] = value
        if quantize is not None:
            from safetensors.torch import load_file, save_file

            assert isinstance(quantize, dict)
            weights = os.path.join(tmp, "model.safetensors")
            state, cfg["quantization_config"] = _quantize(dict(load_file(weights)), quantize)
            save_file({k: v.contiguous() for k, v in state.items()}, weights, metadata={"format": "pt"})  # type: ignore[union-attr]
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
