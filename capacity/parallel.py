"""Tensor-parallel rules exactly as vLLM applies them."""

from __future__ import annotations

from capacity.architecture import Architecture
from capacity.errors import CapacityError

__all__ = ["kv_heads_per_gpu", "tensor_parallel_error", "valid_tensor_parallel_sizes"]


def kv_heads_per_gpu(arch: Architecture, tensor_parallel_size: int) -> int:
    """KV heads each TP rank caches: ``max(1, kv_heads // tp)``.

    When ``tp > kv_heads`` every rank still holds one whole head, so each head is replicated on
    ``tp // kv_heads`` ranks and the cluster-wide KV cache grows by that factor. MLA caches one latent
    (``num_kv_heads == 1``) that every rank replicates (vLLM ``get_num_kv_heads`` returns 1 for MLA).
    """
    return max(1, arch.num_kv_heads // tensor_parallel_size)


def tensor_parallel_error(arch: Architecture, tp: int) -> str | None:
    """Why vLLM would refuse ``tp`` for ``arch``, or None when it accepts it.

    vLLM checks ``num_attention_heads % tp == 0`` (``verify_with_parallel_config``) and, in
    ``QKVParallelLinear``, ``kv_heads % tp == 0`` when ``tp <= kv_heads`` else ``tp % kv_heads == 0``:
    a rank never holds a fraction of a head. MLA has no KV-head split (the latent is replicated).
    """
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        return f"tensor parallel size {tp!r} is not a positive integer"
    heads = arch.num_attention_heads
    if heads % tp:
        return (
            f"tensor parallel size {tp} does not divide the {heads} attention heads of {arch.name}; "
            f"accepted: {_list(valid_tensor_parallel_sizes(arch, max(tp, 8)))}"
        )
    if arch.attention != "MLA":
        kv = arch.num_kv_heads
        if (tp <= kv and kv % tp) or (tp > kv and tp % kv):
            return (
                f"tensor parallel size {tp} splits the {kv} KV heads of {arch.name} into fractions; "
                f"accepted: {_list(valid_tensor_parallel_sizes(arch, max(tp, 8)))}"
            )
    return None


def valid_tensor_parallel_sizes(arch: Architecture, max_tp: int) -> list[int]:
    """Every TP degree from 1 to ``max_tp`` that vLLM accepts for ``arch``, ascending."""
    if isinstance(max_tp, bool) or not isinstance(max_tp, int) or max_tp < 1:
        raise CapacityError(f"maximum tensor parallel size {max_tp!r} is not valid; expected an integer >= 1")
    # A valid TP divides the attention heads, so nothing above the head count needs checking.
    return [tp for tp in range(1, min(max_tp, arch.num_attention_heads) + 1) if _accepted(arch, tp)]


def _accepted(arch: Architecture, tp: int) -> bool:
    if arch.num_attention_heads % tp:
        return False
    if arch.attention == "MLA":
        return True
    kv = arch.num_kv_heads
    return kv % tp == 0 if tp <= kv else tp % kv == 0


def _list(sizes: list[int]) -> str:
    return ", ".join(str(s) for s in sizes) if sizes else "none"
