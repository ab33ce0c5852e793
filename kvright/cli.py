"""The ``kvright`` command line: plan vLLM deployments offline from the capacity engine.

Five commands, human tables by default and ``--json`` for machines (sizes in bytes, times in seconds)::

    kvright catalog
    kvright inspect MODEL [--gpus-per-node N]
    kvright kv MODEL --context L --batch B [--kv-cache-dtype D] [--tensor-parallel-size T] [--gpu G]
    kvright tpot MODEL --gpu G --tensor-parallel-size T --batch B --context L [--kv-cache-dtype D]
    kvright plan MODEL --gpu G [--gpus-per-node 8] [--max-gpus N] [--max-model-len L] [--tpot-ms X]
                 [--ttft-ms Y] [--concurrency C] [--kv-cache-dtype D] [--gpu-memory-utilization U]

MODEL is a catalog id, a path to a ``config.json`` or a folder holding one. Bad input prints one line
(``kvright: error: ...``) and exits 2; nothing here prints a traceback for an input problem.

This module imports only ``capacity`` and the standard library so that a whole ``kvright plan`` process
stays fast (no kopf, kubernetes or prometheus imports).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, NoReturn

import capacity as cap
from capacity.memory import FP8_DS_MLA

__all__ = ["main"]

EXIT_USAGE = 2
#: ``kvright plan`` found no feasible plan (the answer is still printed, with the reason).
EXIT_INFEASIBLE = 1
GB = 1e9
GiB = 2**30


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"kvright: error: {' '.join(message.split())}\n")
        raise SystemExit(EXIT_USAGE)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer; expected an integer >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not >= 1; expected an integer >= 1")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; expected a positive number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number; expected a positive number")
    return value


def _fraction(text: str) -> float:
    value = _positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"{text} is above 1; expected a fraction in (0, 1]")
    return value


KV_DTYPE_CHOICES = ("auto", "fp8", "bfloat16", "float16")

TRUST_REMOTE_CODE = (
    "vLLM reads this config or builds this model only by running the model repository's own Python "
    "(auto_map): serve it with --trust-remote-code (an LLMDeployment: model.trustRemoteCode: true), for a "
    "repository you trust"
)
#: ``kvright plan``'s warning where the plan's vLLM arguments lack the flag the model needs.
UNTRUSTED_PLAN = (
    f"{TRUST_REMOTE_CODE}; the vllm args above lack the flag, and vLLM stops at start without it "
    "(plan with --trust-remote-code to add it)"
)
#: ``kvright inspect``'s words for capacity.ConfigReader.
CONFIG_READERS: dict[str, str] = {
    "engine": "vLLM (its own or transformers' config class)",
    "checkpoint": f"the repository's own code: {TRUST_REMOTE_CODE}",
    "none": "nothing in vLLM: see the warning",
}


def _command(sub: Any, name: str, help: str, model_help: str | None = None) -> argparse.ArgumentParser:
    """A subcommand with what every planning command takes: MODEL (where given its help) and ``--json``."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=help)
    if model_help is not None:
        p.add_argument("model", metavar="MODEL", help=model_help)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def _parser() -> _Parser:
    parser = _Parser(
        prog="kvright", description="Right-size vLLM deployments from KV-cache and roofline math."
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    models = ", ".join(cap.catalog_ids())
    gpus = ", ".join(cap.gpu_ids())
    model_help = f"catalog id ({models}), a config.json or a folder holding one"

    p = _command(sub, "inspect", "parameters, attention kind, KV bytes per token, valid TP sizes", model_help)
    p.add_argument("--gpus-per-node", type=_positive_int, default=8, help="largest TP to list (default 8)")

    p = _command(sub, "kv", "KV-cache bytes for a batch of sequences, against the weights", model_help)
    p.add_argument("--context", type=_positive_int, required=True, help="tokens per sequence")
    p.add_argument("--batch", type=_positive_int, required=True, help="sequences")
    p.add_argument("--kv-cache-dtype", choices=KV_DTYPE_CHOICES, default="auto")
    p.add_argument("--tensor-parallel-size", type=_positive_int, default=1)
    p.add_argument(
        "--max-num-batched-tokens",
        type=_positive_int,
        default=8192,
        help="vLLM's step token budget; sliding layers reserve their window plus twice it (default 8192)",
    )
    p.add_argument(
        "--gpu",
        help=f"GPU id ({gpus}) or GFD product label: the layout vLLM keeps on it where that depends on the "
        "GPU (DeepSeek-V4.1's records and blocks by compute capability; default: Hopper's)",
    )

    p = _command(sub, "tpot", "roofline decode step: where the time goes", model_help)
    p.add_argument("--gpu", required=True, help=f"GPU id ({gpus}) or GFD product label")
    p.add_argument("--tensor-parallel-size", type=_positive_int, required=True)
    p.add_argument("--batch", type=_positive_int, required=True, help="sequences decoded together")
    p.add_argument("--context", type=_positive_int, required=True, help="context tokens per sequence")
    p.add_argument("--kv-cache-dtype", choices=KV_DTYPE_CHOICES, default="auto")

    p = _command(
        sub, "plan", "choose the layout (TP x PP x DP, EP), KV dtype, --max-num-seqs and replicas", model_help
    )
    p.add_argument(
        "--gpu",
        required=True,
        help=f"GPU id ({gpus}) or GFD product label; a comma list, or `any` for the whole catalog, plans "
        "each and chooses the cheapest that holds the workload",
    )
    p.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="PRODUCT=USD_PER_HOUR",
        help="price of one GPU-hour of a product (repeatable; default: the catalog's list price)",
    )
    # Numeric options that default to "not set" (the planner chooses): (flag, type, help).
    optional: tuple[tuple[str, Callable[[str], Any], str], ...] = (
        ("--max-gpus", _positive_int, "GPU budget over all replicas (default: one node); above a node's "
         "GPUs replicas may span nodes"),
        ("--max-model-len", _positive_int, "default: the model's maximum"),
        ("--prompt-tokens", _positive_int, "typical prompt (default: full length)"),
        ("--output-tokens", _positive_int, "typical output length"),
        ("--shared-prefix-tokens", _positive_int, "tokens every prompt starts with (a system prompt): vLLM's "
         "prefix cache holds them once and prefills them once"),
        ("--tpot-ms", _positive_float, "TPOT SLO in milliseconds"),
        ("--ttft-ms", _positive_float, "TTFT SLO in milliseconds"),
        ("--concurrency", _positive_int, "sequences in flight to serve"),
        ("--tensor-parallel-size", _positive_int, "pin TP"),
        ("--pipeline-parallel-size", _positive_int, "pin PP"),
        ("--data-parallel-size", _positive_int, "pin DP (with expert parallelism)"),
        ("--max-num-seqs", _positive_int, "pin --max-num-seqs"),
        ("--network-gb-per-second", _positive_float, "node-to-node bandwidth per GPU in GB/s (default: the "
         "GPU catalog's, 50 = 400 Gb/s)"),
        ("--max-loras", _positive_int, "LoRA adapters resident on a GPU at once (turns LoRA on; their "
         "buffers come out of the KV cache)"),
        ("--max-lora-rank", _positive_int, "largest LoRA rank, one of vLLM's 1, 8, 16, 32, 64, 128, 256, "
         "320, 512 (turns LoRA on; default 16)"),
        ("--max-cpu-loras", _positive_int, "LoRA adapters cached in host memory (at least --max-loras)"),
    )  # fmt: skip
    p.add_argument("--gpus-per-node", type=_positive_int, default=8)
    for flag, kind, text in optional:
        p.add_argument(flag, type=kind, default=None, help=text)
    p.add_argument(
        "--percentile",
        type=int,
        choices=sorted(cap.PERCENTILES),
        default=90,
        help="percentile the TPOT and TTFT SLOs hold at (default 90, as the CRD)",
    )
    p.add_argument(
        "--kv-cache-dtype",
        choices=KV_DTYPE_CHOICES,
        default=None,
        help="pin the KV dtype (auto = the model's dtype); default: try auto and fp8 where supported",
    )
    p.add_argument("--gpu-memory-utilization", type=_fraction, default=0.9)
    p.add_argument(
        "--expert-parallel",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="pin --enable-expert-parallel on or off (MoE; default: choose)",
    )
    p.add_argument(
        "--quantization",
        choices=cap.QUANTIZATION_CHOICES,
        default="none",
        help="FP8 weights quantized at load (--quantization fp8_per_tensor) for an unquantized checkpoint: "
        "none (default; it changes the model), fp8 (always), auto (only when the unquantized weights do not "
        "fit or miss the SLO)",
    )
    p.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="let vLLM run the Python the model repository ships (auto_map), as an LLMDeployment's "
        "model.trustRemoteCode: the plan's vllm args carry --trust-remote-code",
    )
    p.add_argument(
        "--calibration",
        type=_positive_float,
        default=1.0,
        help="the serving model's calibration scale: multiplies every predicted step time (default 1)",
    )

    _command(sub, "catalog", "the built-in models (ids for MODEL and spec.model.architecture) and GPUs")

    sub.add_parser(
        "operator", help="run the operator (kopf; settings from KVRIGHT_* variables, see docs/operator.md)"
    )
    return parser


# ----- commands: each returns (json object, human text) -----------------------------------------------


def _check_context(arch: cap.Architecture, context: int) -> None:
    too_long = arch.context_error(context)
    if too_long is not None:
        raise cap.CapacityError(too_long)


def _max_context(arch: cap.Architecture) -> str:
    """``131,072 tokens``, with how vLLM derives it when RoPE scales it or LongRoPE serves less by default."""
    text = f"{arch.max_model_len:,} tokens"
    if arch.rope_scaling_factor != 1.0:
        text += f" ({arch.max_position_embeddings:,} positions x RoPE factor {arch.rope_scaling_factor:g})"
    if arch.default_max_model_len != arch.max_model_len:
        text += f"; {arch.default_max_model_len:,} when no context is given (LongRoPE's original length)"
    return text


def _catalog(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    models = []
    for model_id in cap.catalog_ids():
        source, published = cap.catalog_source(model_id)
        reader = cap.config_reader(cap.catalog_entry(model_id)["config"])  # the file alone: no full read
        models.append(
            {"id": model_id, "source": source, "published_parameters": published, "config_reader": reader}
        )
    gpus: list[dict[str, Any]] = [
        {
            "id": gpu.id,
            "name": gpu.name,
            "product_labels": list(gpu.product_labels),
            "memory_bytes": gpu.memory_bytes,
            "hbm_bytes_per_second": gpu.hbm_bytes_per_second,
            "bf16_flops_per_second": gpu.bf16_flops_per_second,
            "fp8_flops_per_second": gpu.fp8_flops_per_second,
            "supports_fp8": gpu.supports_fp8,
            "fp8_kv_cache": gpu.fp8_kv_cache,
        }
        for gpu in map(cap.gpu_spec, cap.gpu_ids())
    ]
    families = {
        family: sorted(name for name, of in cap.FAMILIES.items() if of == family)
        for family in dict.fromkeys(cap.FAMILIES.values())  # in the order capacity declares them
    }
    width = max(map(len, families))
    text = "\n".join(
        [
            "models (MODEL in inspect/kv/tpot/plan, spec.model.architecture in an LLMDeployment):",
            _columns(
                [
                    (
                        m["id"],
                        m["published_parameters"],
                        m["source"],
                        "needs model.trustRemoteCode" if m["config_reader"] == "checkpoint" else "",
                    )
                    for m in models
                ]
            ),
            "GPUs (--gpu takes the id or a GPU Feature Discovery product label, spec.gpu.product the label):",
            _columns(
                [
                    (
                        g["id"],
                        g["name"],
                        _gib(g["memory_bytes"]),
                        f"{g['hbm_bytes_per_second'] / 1e12:.2f} TB/s",
                        "fp8" if g["supports_fp8"] else "fp8 KV only" if g["fp8_kv_cache"] else "no fp8",
                        ", ".join(g["product_labels"]),
                    )
                    for g in gpus
                ]
            ),
            "architectures (config.json's `architectures`, by family; another is read by its model_type "
            "where kvright knows\nthat, planned as a standard decoder with a warning where its config has "
            "only the standard fields, or refused):",
            *(
                textwrap.fill(
                    ", ".join(names),
                    width=110,
                    initial_indent=f"  {family:<{width}}  ",
                    subsequent_indent=" " * (width + 4),
                    break_on_hyphens=False,
                )
                for family, names in families.items()
            ),
        ]
    )
    architectures = [{"architecture": name, "family": of} for name, of in sorted(cap.FAMILIES.items())]
    return {"models": models, "gpus": gpus, "architectures": architectures}, text


def _inspect(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    arch = cap.load_architecture(args.model)
    # By the dtype stored: the model's own dtype asked for by name (a ModelOpt checkpoint's "auto" is fp8).
    own = arch.dtype if arch.dtype in cap.KV_CACHE_DTYPES else "auto"
    if arch.compressed_attention:  # DeepSeek-V4 keeps one layout, fp8_ds_mla, whatever is asked
        kv = {FP8_DS_MLA: cap.kv_cache_bytes_per_token(arch)}
    else:
        kv = {arch.dtype: cap.kv_cache_bytes_per_token(arch, kv_cache_dtype=own)}
        if not arch.model_dtype_kv_cache:  # (Inkling's attention keeps its own dtype only)
            kv["fp8"] = cap.kv_cache_bytes_per_token(arch, kv_cache_dtype="fp8")
    valid_tp = cap.valid_tensor_parallel_sizes(arch, args.gpus_per_node)
    refused_tp = _refused_tp(arch, args.gpus_per_node)
    data: dict[str, Any] = {
        "model": arch.name,
        "model_type": arch.model_type,
        "architecture": arch.architecture,
        "quantization": arch.weights.method,
        "weight_format": arch.weights.label,
        "parameters": arch.parameters,
        "vision_parameters": arch.vision_parameters,
        "tower_whole_parameters": arch.vision_whole_parameters,
        "active_parameters": arch.active_parameters,
        "attention": arch.attention,
        "kv_cache_bytes_per_token": kv,
        "valid_tensor_parallel_sizes": valid_tp,
        "refused_tensor_parallel_sizes": refused_tp,
        "weight_bytes": cap.weight_bytes(arch),
        "host_weight_bytes": round(arch.weight_groups.host_tables),
        "host_table_parameters": round(arch.parameter_groups.host_tables),
        "num_layers": arch.num_decoder_layers,
        "num_attention_heads": arch.num_attention_heads,
        "num_kv_heads": arch.num_kv_heads,
        "head_dim": arch.head_dim,
        "max_position_embeddings": arch.max_position_embeddings,
        "rope_scaling_factor": arch.rope_scaling_factor,
        "max_model_len": arch.max_model_len,
        "default_max_model_len": arch.default_max_model_len,
        "sliding_window": arch.sliding_window,
        "sliding_window_layers": arch.num_sliding_window_layers,
        "attention_chunk_size": arch.attention_chunk_size,
        "compress_ratios": dict(sorted(Counter(layer.compress_ratio for layer in arch.layers).items()))
        if arch.compressed_attention
        else {},
        "layer_kinds": dict(sorted(arch.mixer_counts.items())),
        # what the state layers ("mamba", "linear" above) run: LFM2's are short convolutions
        "state_kind": arch.state.kind if arch.state is not None else None,
        # sparse attention's indexers: MiniMax-M3's layers', DeepSeek-V3.2's (IndexCache's kept ones)
        "indexer_layers": arch.num_indexers,
        "num_experts": arch.num_experts,
        "experts_per_token": arch.num_experts_per_token,
        "zero_experts": arch.zero_experts,
        "routed_experts_per_token": arch.routed_experts_per_token,
        "mtp_layers": arch.mtp_layers,
        # Inkling's short convolutions: the window of inputs each layer keeps per sequence (at TP 1)
        "short_conv_kernel": arch.short_conv_kernel,
        "short_conv_bytes_per_sequence": cap.memory.short_conv_bytes_per_sequence(arch, 1),
        "config_reader": arch.config_reader,
        "warnings": list(arch.warnings),
    }

    def width(kv: int, k: int, v: int) -> str:
        return f"{kv} KV heads x {k}" + (f" (values {v})" if v != k else "")

    # The model's heads, then layers whose heads differ (Gemma 4's global layers, MiMo-V2's and Step-3.5's
    # sliding ones).
    layer_heads = [
        (layer.mixer, arch.kv_heads_of(layer), arch.head_dim_of(layer), arch.v_head_dim_of(layer), q)
        for layer in arch.layers
        if layer.mixer in ("full", "sliding", "chunked")
        for q in (arch.heads_of(layer),)
    ]
    model = (arch.num_kv_heads, arch.head_dim, arch.num_attention_heads)
    standard = next(
        ((kv, k, v, q) for _, kv, k, v, q in layer_heads if (kv, k, q) == model),
        (arch.num_kv_heads, arch.head_dim, arch.head_dim, arch.num_attention_heads),
    )
    heads = "latent" if arch.attention == "MLA" else width(*standard[:3])
    heads += "".join(
        f"; {mixer} layers {'' if q == arch.num_attention_heads else f'{q} query heads, '}{width(kv, k, v)}"
        for mixer, kv, k, v, q in sorted(set(layer_heads))
        if arch.attention != "MLA" and (kv, k, v, q) != standard
    )
    sparse = ""
    if indexers := arch.num_indexers:
        sparse = f"; sparse: indexers in {indexers} of them pick {arch.index_topk:,} tokens to attend to"
        if dense := sum(layer.dense_attention for layer in arch.layers):  # HY V4's full_attention layers
            sparse += f" ({dense} {'layer attends' if dense == 1 else 'layers attend'} to the whole context)"
    shared = sum(layer.kv_shared for layer in arch.layers)
    if shared:
        heads += f"; the last {shared} layers read earlier layers' caches (none of their own)"
    # A hybrid's attention heads are on its attention layers only (Nemotron-H: 8 of 88).
    attending = arch.num_attention_layers
    layers = f"{arch.num_decoder_layers} layers"
    if attending < arch.num_decoder_layers:
        layers = f"{attending} of {layers}"
    elif attending > arch.num_decoder_layers:  # LongCat-Flash: two attentions a layer
        layers = f"{attending} in {layers}"
    experts = f"{arch.num_experts_per_token} of {arch.num_experts} experts"
    if arch.zero_experts:
        experts += (
            f" and {arch.zero_experts} zero experts, {arch.routed_experts_per_token:.3g} routed on average"
        )
    rows = [
        ("model", f"{arch.name} ({arch.architecture or arch.model_type}, {arch.dtype})"),
        ("weight format", arch.weights.label),
        ("parameters", f"{arch.parameters / 1e9:.2f} B"),
        (
            "active parameters",
            f"{arch.active_parameters / 1e9:.2f} B" + (f" ({experts})" if arch.is_moe else ""),
        ),
        ("weights", f"{cap.weight_bytes(arch) / GB:.1f} GB{_host_part(arch)}"),
        *(("towers", _towers_label(arch)),) * bool(arch.vision_parameters),
        *(
            (
                "MTP layers",
                f"{arch.mtp_layers} in the checkpoint, not counted above: vLLM loads them only as a "
                "speculative-decoding draft (--speculative-config), which kvright does not plan",
            ),
        )
        * bool(arch.mtp_layers),
        (
            "attention",
            f"{arch.attention}: {arch.num_attention_heads} query heads, {heads}, {layers}{sparse}"
            if attending
            else "none: no layer attends, each keeps a constant state per sequence",
        ),
        (
            "KV bytes/token",
            ", ".join(f"{k} {v:,} B" for k, v in kv.items()) + " (every attention layer, before its bound)",
        ),
        (
            "layers",
            ", ".join(f"{n} {_mixer_label(arch, kind)}" for kind, n in sorted(arch.mixer_counts.items()))
            + (
                (
                    " (side by side: each layer has one of each)"
                    if len(arch.mixer_counts) > 1
                    else f" ({arch.layers_per_block} a layer)"
                )
                if arch.layers_per_block > 1
                else ""
            ),
        ),
        (
            "sliding window",
            f"{arch.sliding_window} tokens on {arch.num_sliding_window_layers} layers"
            if arch.sliding_window
            else "none",
        ),
        *(
            (
                "short convs",
                f"the last {arch.short_conv_kernel} tokens' inputs of 4 convolutions a layer, "
                f"{cap.memory.short_conv_bytes_per_sequence(arch, 1):,} B a sequence at TP 1 (in "
                f"{arch.dtype}, whatever --kv-cache-dtype; paged as sliding windows beside the KV cache)",
            ),
        )
        * bool(arch.short_conv_kernel),
        *(("compressed", _compressed_label(arch)),) * arch.compressed_attention,
        *(
            (
                "sparse layers",
                f"{arch.num_indexer_layers} of {arch.num_decoder_layers}: an indexer each, its "
                f"{arch.index_head_dim}-wide bfloat16 key cached a token, "
                f"{arch.index_topk:,} tokens attended",
            ),
        )
        * bool(arch.num_indexer_layers),
        ("max context", _max_context(arch)),
        ("valid TP", ", ".join(str(t) for t in valid_tp)),
        *(
            (f"TP {tp} refused", why["reason"] + _EP_ACCEPTS * why["accepted_with_expert_parallel"])
            for tp, why in refused_tp.items()
        ),
        ("config read by", CONFIG_READERS[arch.config_reader]),
        *(("warning", w) for w in arch.warnings),
    ]
    return data, _table(rows)


_EP_ACCEPTS = "; with expert parallelism it is accepted"


def _refused_tp(arch: cap.Architecture, gpus_per_node: int) -> dict[int, dict[str, Any]]:
    """The power-of-two TP degrees up to a node that vLLM refuses for ``arch``: the rule that refuses each,
    and whether expert parallelism (experts whole, not split by width) makes it acceptable."""
    sizes = [2**k for k in range(1, gpus_per_node.bit_length()) if 2**k <= gpus_per_node]
    reasons = {tp: cap.tensor_parallel_reason(arch, tp) for tp in sizes}
    return {
        tp: {
            "reason": reason,
            "accepted_with_expert_parallel": bool(arch.num_experts)
            and cap.tensor_parallel_reason(arch, tp, expert_parallel=True) is None,
        }
        for tp, reason in reasons.items()
        if reason is not None
    }


def _towers_label(arch: cap.Architecture) -> str:
    """A wrapper's vision and audio towers: ``0.64 B parameters, all whole on every GPU; no KV cache``."""
    whole = arch.vision_whole_parameters
    held = (
        "all whole on every GPU"
        if whole == arch.vision_parameters
        else f"{whole / 1e9:.2f} B of them whole on every GPU, the rest split by TP"
        if whole
        else "split by TP"
    )
    if arch.tower_split_heads:
        blocks, heads = arch.tower_head_split_parameters / 1e9, arch.tower_split_heads
        held += f"; the audio encoder's {blocks:.2f} B only where TP divides its {heads} heads (else whole)"
    if arch.vision_tp_widths:
        widths = ", ".join(what.format(width) for what, width in arch.vision_tp_widths)
        held += f" (the vision tower whole where TP does not divide its {widths}: --mm-encoder-tp-mode data)"
    return f"{arch.vision_parameters / 1e9:.2f} B parameters (encoders and projectors), {held}; no KV cache"


def _compressed_label(arch: cap.Architecture) -> str:
    """DeepSeek-V4's compressed caches: ``21 layers 1 per 4 tokens (top 512 by an indexer), 20 1 per 128``."""
    ratios = Counter(layer.compress_ratio for layer in arch.layers if layer.compress_ratio)
    if arch.shared_compressed_caches:  # DeepSeek-V4.1: the sources write, every compressed layer reads
        sources = [layer.compress_ratio for layer in arch.layers if layer.kv_source]
        indexers = sum(layer.index_source for layer in arch.layers)
        read = sum(ratios.values())
        rates = " or ".join(map(str, sorted(set(sources))))
        return (
            f"{read} layers read the top {arch.index_topk} of {len(sources)} kv source layers' caches "
            f"(1 latent per {rates} tokens), picked by {indexers} index source layers"
            if read
            else "none (the window alone)"
        )
    return (
        ", ".join(
            f"{n} layers 1 latent per {r} tokens"
            + (f" (top {arch.index_topk} by an indexer)" if r == 4 else "")
            for r, n in sorted(ratios.items())
        )
        or "none (the window alone)"
    )


def _host_part(arch: cap.Architecture) -> str:
    """What of the weights vLLM keeps in host memory, not on a GPU (Qwen3.8's and DeepSeek-V4.1's n-gram
    tables), as a suffix."""
    host = arch.weight_groups.host_tables
    return f" ({host / GB:.1f} GB of it in pinned host memory, on no GPU)" if host else ""


def _mixer_label(arch: cap.Architecture, mixer: str) -> str:
    """A layer kind as people call it: LFM2's state layers are short convolutions, Qwen3-Next's and Kimi's
    linear attention, not Mamba."""
    if mixer == "mamba" and arch.state is not None and arch.state.kind == "short_conv":
        return "short-conv"
    if mixer == "mamba" and arch.state is not None and arch.state.kind in ("kda", "gated_deltanet"):
        return "linear-attention"  # Kimi Delta Attention, Gated DeltaNet: a state, not Mamba's
    return mixer


def _kv(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    arch = cap.load_architecture(args.model)
    _check_context(arch, args.context)
    tp = args.tensor_parallel_size
    error = cap.tensor_parallel_error(arch, tp)
    if error is not None:
        raise cap.CapacityError(error)
    gpu = None if args.gpu is None else cap.gpu_spec(args.gpu)
    capability = None if gpu is None else gpu.compute_capability
    per_seq = cap.kv_cache_bytes_per_sequence(
        arch,
        args.context,
        kv_cache_dtype=args.kv_cache_dtype,
        tensor_parallel_size=tp,
        max_num_batched_tokens=args.max_num_batched_tokens,
        compute_capability=capability,
    )
    total = per_seq * args.batch
    weights = cap.weight_bytes(arch)
    # How many times each KV head is held over the TP group (1 where nothing grows per token: no attention).
    one_copy = cap.kv_cache_bytes_per_token(arch)
    replication = cap.kv_cache_bytes_per_token(arch, tensor_parallel_size=tp) // one_copy if one_copy else 1
    layout = cap.kv_cache_layout(
        arch,
        tensor_parallel_size=tp,
        kv_cache_dtype=args.kv_cache_dtype,
        max_num_batched_tokens=args.max_num_batched_tokens,
        compute_capability=capability,
    )
    # A group grows at this context when one more block of tokens needs one more block of it: full
    # attention always, a sliding or chunked layer while the context is inside its bound.
    # (A group's block holds its own number of tokens where vLLM unified pages of different sizes.)
    growing = {
        g
        for g in layout.groups
        if layout.group_blocks(g, args.context + g.tokens_per_block(layout.block_size))
        > layout.group_blocks(g, args.context)
    }
    per_block = layout.bytes_per_block * tp
    # What a running request keeps once vLLM frees what falls behind its windows (KVCacheLayout.sequences).
    held = layout.held_blocks_per_sequence(args.context) * per_block
    kinds = [
        {
            "kind": g.kind,
            "short_conv": g.short_conv,
            "layers": g.layers,
            "groups": g.count,
            "bound_tokens": g.bound,
            "tokens_per_block": g.tokens_per_block(layout.block_size),
            "grows_with_context": g in growing,
            "bytes_per_sequence": layout.group_blocks(g, args.context) * g.count * per_block,
        }
        for g in layout.groups
    ]
    growth = sum(Fraction(g.count * per_block, g.tokens_per_block(layout.block_size)) for g in growing)
    data = {
        "kv_cache_bytes": total,
        "kv_cache_bytes_per_sequence": per_seq,
        "held_bytes_per_sequence": held,
        "growth_bytes_per_token": int(growth),
        "block_size": layout.block_size,
        "by_layer_kind": kinds,
        "weight_bytes": weights,
        "kv_to_weight_ratio": total / weights,
        "kv_cache_bytes_per_gpu": total // tp,
        "replication": replication,
        "kv_cache_dtype": args.kv_cache_dtype,
        "tensor_parallel_size": tp,
        "gpu": None if gpu is None else gpu.id,
    }
    rows = [
        (
            "KV cache",
            f"{total / GB:.1f} GB ({args.batch} x {args.context:,} tokens, {args.kv_cache_dtype}"
            + ("" if gpu is None else f", as vLLM lays it out on {gpu.id}")
            + ")",
        ),
        ("per sequence", f"{per_seq / GB:.2f} GB reserved, {held / GB:.2f} GB held while it runs"),
        (
            "per GPU",
            f"{total / tp / GB:.1f} GB at TP {tp}"
            + (f" ({replication}x replicated)" if replication > 1 else ""),
        ),
        ("weights", f"{weights / GB:.1f} GB{_host_part(arch)}"),
        ("KV / weights", f"{total / weights:.2f}"),
    ]
    for kind in kinds:
        bound = {
            "full": "grows with the context",
            "sliding": f"window {kind['bound_tokens']} plus the in-flight tokens",
            "chunked": f"chunk {kind['bound_tokens']} plus the in-flight tokens",
            "mamba": "a constant state per sequence",
            "ring": "a constant ring of the last keys per sequence",
        }[str(kind["kind"])]
        what = f"{_mixer_label(arch, str(kind['kind']))} layers"
        if kind["kind"] == "ring":  # GLM-5.3's indexer tails (one per MLA layer), V4.1's compressors'
            what = "compressor state rings" if arch.shared_compressed_caches else "indexer tail rings"
        if kind["short_conv"]:  # Inkling's: a window of the convolutions' inputs beside each layer's KV
            what = "short-conv caches"
            bound = f"the last {kind['bound_tokens']} tokens plus the in-flight ones"
        rows.append(
            (
                what,
                f"{kind['layers']}: {int(kind['bytes_per_sequence']) / GB:.3f} GB per sequence ({bound})",
            )
        )
    return data, _table(rows)


def _tpot(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    arch = cap.load_architecture(args.model)
    gpu = cap.gpu_spec(args.gpu)
    _check_context(arch, args.context)
    if args.kv_cache_dtype == "fp8" and not gpu.fp8_kv_cache:
        raise cap.CapacityError(
            f"vLLM cannot keep an fp8 KV cache on {gpu.id}; expected --kv-cache-dtype auto, bfloat16 "
            "or float16"
        )
    step = cap.decode_step(
        arch,
        gpu,
        tensor_parallel_size=args.tensor_parallel_size,
        batch=args.batch,
        context_tokens=args.context,
        kv_cache_dtype=args.kv_cache_dtype,
    )
    data = step.to_dict()
    # A roofline prices any setup; say when this one cannot exist, by capacity's own memory model (vLLM's
    # accounting at its default --gpu-memory-utilization): the sequences of this context that fit at once.
    tp = args.tensor_parallel_size
    config = cap.EngineConfig(
        layout=cap.Layout(tensor_parallel_size=tp, gpus_per_node=max(8, tp)),
        kv_cache_dtype=args.kv_cache_dtype,
    )
    memory = cap.KVMemory(arch, gpu, config)
    # The batch's blocks as vLLM's scheduler runs it: one request admitted, the rest at what they hold, and
    # the pool's null block (capacity.KVCacheLayout.sequences).
    layout = memory.layout
    blocks = 1 + layout.admitted_blocks_per_sequence(args.context)
    blocks += (args.batch - 1) * layout.held_blocks_per_sequence(args.context)
    per_gpu = memory.weights + blocks * layout.bytes_per_block
    fit = memory.sequences(args.context, args.batch)
    warnings = []
    if fit < args.batch:
        warnings.append(
            f"one {gpu.id} holds {fit} of these {args.batch} sequences ({memory.weights / GiB:.1f} GiB of "
            f"weights per GPU, {memory.budget / GiB:.1f} GiB budget at --gpu-memory-utilization "
            f"{config.gpu_memory_utilization:g}): vLLM cannot run this batch (kvright plan sizes what fits)"
        )
    data["memory_bytes_per_gpu"] = round(per_gpu)
    data["warnings"] = warnings
    rows = [
        (
            "setup",
            f"{arch.name} on {args.tensor_parallel_size} x {gpu.id}, batch {args.batch}, "
            f"context {args.context:,}, {args.kv_cache_dtype} KV",
        ),
        *_step_rows(step, " of HBM time"),
        ("predicted TPOT", _ms(step.predicted_seconds)),
        ("bottleneck", step.bottleneck),
        (
            "crossover batch",
            f"{step.crossover_batch} (KV reads overtake weight reads)" if step.crossover_batch else "never",
        ),
        *(("warning", w) for w in warnings),
    ]
    return data, _table(rows)


def _gpus(text: str) -> list[cap.GPU]:
    """``--gpu``: one product, a comma list, or ``any`` (the whole catalog)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise cap.CapacityError(f"--gpu {text!r} names no GPU; expected an id, a comma list or any")
    if [n.lower() for n in names] == ["any"]:
        return [cap.gpu_spec(g) for g in cap.gpu_ids()]
    return [cap.gpu_spec(n) for n in names]


def _plan(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    arch = cap.load_architecture(args.model)
    gpus = _gpus(args.gpu)
    prices = dict(cap.parse_price(p) for p in args.price)
    if args.output_tokens is not None and args.prompt_tokens is None:
        raise cap.CapacityError("--output-tokens needs --prompt-tokens; expected both or neither")
    workload = cap.Workload(
        max_model_len=args.max_model_len,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        concurrency=args.concurrency,
        shared_prefix_tokens=args.shared_prefix_tokens or 0,
    )
    slo = cap.SLO(
        tpot_seconds=args.tpot_ms / 1e3 if args.tpot_ms else None,
        ttft_seconds=args.ttft_ms / 1e3 if args.ttft_ms else None,
        percentile=args.percentile,
    )
    limits = cap.Limits(
        gpus_per_node=args.gpus_per_node,
        max_gpus=args.max_gpus,
        kv_cache_dtype=args.kv_cache_dtype,
        gpu_memory_utilization=args.gpu_memory_utilization,
        tensor_parallel_size=args.tensor_parallel_size,
        pipeline_parallel_size=args.pipeline_parallel_size,
        data_parallel_size=args.data_parallel_size,
        expert_parallel=args.expert_parallel,
        network_bytes_per_second=args.network_gb_per_second * 1e9 if args.network_gb_per_second else None,
        max_num_seqs=args.max_num_seqs,
        quantization=args.quantization,
        lora=_lora(args),
    )
    choice = cap.choose_gpu(arch, gpus, workload, slo, limits, prices=prices, calibration=args.calibration)
    first = choice.alternatives[0]
    if len(gpus) == 1 and not first.feasible:
        # A refusal names another GPU product that holds the workload (issue 14: the levers that help).
        others = [cap.gpu_spec(g) for g in cap.gpu_ids() if g != first.gpu.id]
        try:
            options = cap.choose_gpu(
                arch, others, workload, slo, limits, prices=prices, calibration=args.calibration
            )
            fit = options.holds_it()
        except cap.CapacityError:  # the request is invalid on every other GPU too: nothing to name
            fit = None
        if fit is not None:
            first = dataclasses.replace(
                first, result=dataclasses.replace(first.result, reason=f"{first.result.reason}; {fit}")
            )
    data = first.result.to_dict()
    if data["plan"] is not None:
        row = first.to_dict()
        data["plan"].update(gpu=row["gpu"], gpu_product=row["gpu_product"], usd_per_hour=row["usd_per_hour"])
    data["cold_start_seconds"] = {
        source: round(start.seconds, 1) for source, start in _cold_starts(arch, first.result).items()
    }
    data["config_reader"] = arch.config_reader
    data["warnings"] = [*arch.warnings, *data["warnings"]]
    if args.trust_remote_code and data["plan"] is not None:
        data["vllm_args"] = [*data["vllm_args"], "--trust-remote-code"]
        data["vllm_args_by_role"] = {
            role: [*role_args, "--trust-remote-code"] for role, role_args in data["vllm_args_by_role"].items()
        }
    elif arch.needs_remote_code and not args.trust_remote_code:
        data["warnings"].append(UNTRUSTED_PLAN)
    text = _plan_text(arch, first.gpu, first.result, trust_remote_code=args.trust_remote_code)
    if len(gpus) > 1:
        data["alternatives"] = [a.to_dict() for a in choice.alternatives]
        text += "\n" + _alternatives_text(choice)
    return data, text


def _lora(args: argparse.Namespace) -> cap.Lora | None:
    """LoRA is on when any LoRA flag is given; unset values take vLLM's defaults."""
    if args.max_loras is None and args.max_lora_rank is None and args.max_cpu_loras is None:
        return None
    return cap.Lora(
        max_loras=args.max_loras or 1,
        max_lora_rank=args.max_lora_rank or 16,
        max_cpu_loras=args.max_cpu_loras,
    )


def _alternatives_text(choice: cap.GPUChoice) -> str:
    lines = ["", "GPU products (cheapest feasible first)"]
    lines.append(f"  {'gpu':<10} {'GPUs':>4} {'$/GPU-h':>8} {'$/h':>8} {'$/M tok':>8}  plan / why")
    for a in choice.alternatives:
        d = a.to_dict()
        money = (
            f"{d['usd_per_hour']:>8.2f} {d['usd_per_million_output_tokens'] or 0:>8.3f}"
            if a.feasible
            else f"{'-':>8} {'-':>8}"
        )
        note = a.summary() if a.why == "chosen" else a.why
        lines.append(f"  {a.gpu.id:<10} {a.gpus:>4} {a.usd_per_gpu_hour:>8.2f} {money}  {note}")
    return "\n".join(lines)


def _plan_text(
    arch: cap.Architecture, gpu: cap.GPU, result: cap.PlanResult, *, trust_remote_code: bool = False
) -> str:
    lines = [f"{arch.name} on {gpu.name}: {'feasible' if result.feasible else 'NOT FEASIBLE'}", result.reason]
    if result.plan and result.prediction:
        p, pred = result.plan, result.prediction
        lines += _section(
            "plan",
            [
                ("layout", _layout_text(p)),
                ("replicas", f"{p.replicas} ({p.gpus} GPUs)"),
                (
                    "max-num-seqs",
                    f"{p.max_num_seqs}{' per engine' if p.data_parallel_size > 1 else ''} (set by "
                    f"{pred.binding.constraint}: {pred.binding.detail})",
                ),
                (
                    "limits",
                    ", ".join(limit.label for limit in pred.limits),
                ),
                ("batched tokens", str(p.max_num_batched_tokens)),
                ("KV-cache dtype", p.kv_cache_dtype),
                *(
                    [("attention backend", f"{p.attention_backend} (the model's layers run on it alone)")]
                    if p.attention_backend
                    else []
                ),
                ("max-model-len", f"{p.max_model_len:,}"),
                (
                    "KV tokens/replica" if p.data_parallel_size == 1 else "KV tokens/engine",
                    f"{result.kv_cache_tokens_per_replica:,}"
                    + (f" (x {p.data_parallel_size} engines)" if p.data_parallel_size > 1 else ""),
                ),
                ("max concurrency", f"{result.max_concurrency_at_max_model_len:.2f}x at max-model-len"),
                *(
                    (f"vllm args ({role})", " ".join([*args, *["--trust-remote-code"] * trust_remote_code]))
                    for role, args in p.vllm_args_by_role().items()
                ),
            ],
        )
        d = pred.decode
        lines += _section(
            f"decode step at batch {pred.batch_per_replica} (per GPU)",
            [
                *_step_rows(d),
                (
                    "predicted TPOT",
                    f"{_ms(pred.tpot_seconds)} at p{pred.percentile} (mean {_ms(pred.tpot_mean_seconds)})",
                ),
                ("predicted TTFT", f"{_ms(pred.ttft_seconds)} at p{pred.percentile}"),
                ("throughput", f"{pred.output_tokens_per_second:,.0f} output tokens/s"),
                ("bottleneck", f"{d.bottleneck}; KV reads overtake weights at batch {d.crossover_batch}"),
            ],
        )
        if d.bottleneck == "weights":
            lines.append(
                "  (weights dominate each step, so a smaller KV cache mostly buys batch size, not TPOT)"
            )
    if result.memory:
        m = result.memory
        lines += _section(
            "memory per GPU",
            [
                ("total", _gib(m.total_bytes)),
                ("budget", f"{_gib(m.budget_bytes)} (gpu-memory-utilization)"),
                ("weights", _gib(m.weights_bytes)),
                *(
                    [("LoRA adapters", f"{_gib(m.lora_bytes)} (taken from the KV cache)")]
                    if m.lora_bytes
                    else []
                ),
                ("activation", _gib(m.activation_bytes)),
                ("other", f"{_gib(m.other_bytes)} (CUDA graphs, non-torch, NCCL)"),
                ("KV cache", _gib(m.kv_cache_bytes)),
            ],
        )
    starts = _cold_starts(arch, result)
    if starts:
        lines += _section(
            "cold start per pod (time to Ready, by weight source)",
            [(source, _cold_start_text(start)) for source, start in starts.items()],
        )
    for warning in (*arch.warnings, *result.warnings):
        lines.append(f"warning: {warning}")
    if arch.needs_remote_code and not trust_remote_code:
        lines.append(f"warning: {UNTRUSTED_PLAN}")
    if result.candidates:
        lines += ["", "candidates"]
        header = (
            f"  {'layout':<18} {'KV':>8} {'mnbt':>6} {'seqs':>5} {'repl':>4} {'GPUs':>4} "
            f"{'TPOT ms':>8} {'tok/s/GPU':>10}  note"
        )
        lines.append(header)
        for i, c in enumerate(result.candidates):
            note = "chosen" if i == 0 and result.feasible else c.reason or "ok"
            lines.append(
                f"  {c.layout.label:<18} {c.kv_cache_dtype:>8} {c.max_num_batched_tokens:>6} "
                f"{c.sequences_per_replica:>5} {c.replicas:>4} "
                f"{c.gpus:>4} {c.tpot_seconds * 1e3:>8.1f} {c.output_tokens_per_second_per_gpu:>10.0f}  "
                f"{note}"
            )
    return "\n".join(lines)


def _cold_starts(arch: cap.Architecture, result: cap.PlanResult) -> dict[str, cap.ColdStart]:
    """One pod's cold start from every weight source at the documented defaults (docs/capacity.md)."""
    return cap.plan_cold_starts(result, checkpoint_bytes=cap.weight_bytes(arch))


def _cold_start_text(start: cap.ColdStart) -> str:
    """``668 s (read 564 s, GPU load 9 s, engine 95 s)``: the phases that take time; a cache adds its fill."""
    phases = (
        ("fetch", start.fetch_seconds),
        ("read", start.read_seconds),
        ("GPU load", start.gpu_load_seconds),
        ("engine", start.engine_seconds),
    )
    text = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in phases if seconds > 0)
    if start.first_fill_seconds:
        text += f"; filled once by a download Job in {start.first_fill_seconds:.0f} s"
    return f"{start.seconds:.0f} s ({text})"


def _layout_text(p: cap.Plan) -> str:
    """``TP 8 x PP 2: 16 GPUs per replica over 2 nodes (a leader and 1 worker)``."""
    nodes = p.nodes_per_replica
    where = (
        f" over {nodes} nodes (a leader and {nodes - 1} worker{'s' if nodes > 2 else ''})"
        if nodes > 1
        else ""
    )
    return f"{p.layout.label}: {p.gpus_per_replica} GPUs per replica{where}"


def _section(title: str, rows: Sequence[tuple[str, str]]) -> list[str]:
    """A titled table after a blank line, as ``kvright plan`` prints each part."""
    return ["", title, _table(rows)]


def _table(rows: Sequence[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)


def _step_rows(step: cap.DecodeStep, share_note: str = "") -> list[tuple[str, str]]:
    """Where a decode step's time goes: each HBM read (with its share of the HBM time), compute, links."""
    memory_s = step.weight_read_seconds + step.kv_read_seconds
    return [
        (
            "weight reads",
            f"{_ms(step.weight_read_seconds)} ({_share(step.weight_read_seconds, memory_s)}{share_note})",
        ),
        ("KV reads", f"{_ms(step.kv_read_seconds)} ({_share(step.kv_read_seconds, memory_s)}{share_note})"),
        ("compute", _ms(step.compute_seconds)),
        ("communication", _ms(step.communication_seconds)),
        ("roofline floor", _ms(step.roofline_floor_seconds)),
    ]


def _columns(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells as left-aligned columns, indented like :func:`_table`."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ("  ".join(f"{c:<{w}}" for c, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(f"  {line.rstrip()}" for line in lines)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _gib(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "-"


_COMMANDS = {"catalog": _catalog, "inspect": _inspect, "kv": _kv, "tpot": _tpot, "plan": _plan}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (0 ok, 1 no feasible plan, 2 bad input)."""
    args = _parser().parse_args(argv)
    if args.command == "operator":
        from kvright.operator import main as run_operator  # kopf and the API client only when asked

        return run_operator()
    try:
        data, text = _COMMANDS[args.command](args)
    except cap.CapacityError as exc:
        sys.stderr.write(f"kvright: error: {exc}\n")
        return EXIT_USAGE
    sys.stdout.write((json.dumps(data, indent=2) if args.json else text) + "\n")
    return EXIT_INFEASIBLE if data.get("feasible") is False else 0
