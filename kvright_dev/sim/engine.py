"""The simulated vLLM engine core: continuous batching, chunked prefill, KV blocks and preemption.

Pure and deterministic given its inputs: time is a virtual clock advanced by the modelled step
durations (seeded noise included), never read from the system. :mod:`kvright_dev.sim.server` drives it
from a thread and paces it against the wall clock; :mod:`bench.control_loop` drives it directly.

The scheduling follows vLLM V1's scheduler (``vllm/v1/core/sched/scheduler.py``) in the respects that
matter for latency and capacity:

- every step has a token budget of ``max_num_batched_tokens``; running requests are scheduled first,
  in admission order: each decoding request takes one token, a request still prefilling takes the next
  chunk of its prompt that the budget leaves (chunked prefill);
- then waiting requests are admitted, first come first served, while a seat is free (at most
  ``max_num_seqs`` run), the budget has tokens left and the free KV blocks hold what the request must
  reserve (``blocks_admitted``: by default its prompt plus one token, in blocks of ``block_size``
  tokens); a prompt larger than what is left is chunked over later steps; one block of the pool is
  vLLM's null block, never handed out;
- the step that completes a prompt's prefill samples its first token, and the request keeps only what a
  running request holds (``blocks_held``); every later step samples one more;
- a decoding request takes the blocks its context needs as it grows (``blocks_held``: by default a new
  block each time its context crosses one; with capacity's KV-cache layout, only the full-attention
  groups grow once a sliding group holds its window, as vLLM frees the blocks behind it); when too few
  are free, the most recently admitted request is preempted (recompute mode: its blocks are freed, it
  goes back to the head of the queue, and its prompt plus the tokens it already produced are prefilled
  again on readmission, without emitting a token twice).

How long a step takes is not this module's business: ``step_seconds`` (:mod:`kvright_dev.sim.physics`)
prices a :class:`StepWork`. Bookkeeping is per event (a request joining, crossing a block, finishing),
not per request per step, so a step costs the same at batch 8 and at batch 512: the control-loop bench
runs millions of steps.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["Engine", "Finished", "SimRequest", "StepResult", "StepWork"]


@dataclass(kw_only=True)
class SimRequest:
    """One request inside the engine (mutable engine state)."""

    request_id: int
    prompt_tokens: int
    max_tokens: int
    arrival_time: float
    generated: int = 0
    """Tokens produced so far (kept current while waiting or prefilling; derived from the step count
    while decoding, see :meth:`Engine.generated`)."""
    blocks: int = 0
    first_token_time: float | None = None
    admitted_time: float | None = None
    preemptions: int = 0
    prefill_target: int = 0
    """Tokens this admission prefills: the prompt, plus the tokens produced before a preemption."""
    prefilled: int = 0
    decoding: bool = False
    offset: int = 0
    """While decoding: generated = engine step count - offset."""
    epoch: int = 0
    """Bumped on preemption, so events scheduled for an earlier admission are ignored."""
    grow_at: int = 0
    """While decoding: the context at which it next checks for blocks (a multiple of the engine's
    ``block_size``)."""

    @property
    def context_tokens(self) -> int:
        return self.prompt_tokens + self.generated


class StepWork(NamedTuple):
    """What one engine step computes, for the physics to price (a tuple: built every step)."""

    decode_seqs: int
    """Requests that decode one token."""
    decode_context_tokens: int
    """Sum of their contexts: the KV cache the step reads."""
    prefill_tokens: int
    """Prompt tokens computed in the step (chunks)."""
    prefill_context_tokens: float
    """Sum over the prefill tokens of the context each attends to (causal: its position)."""


@dataclass(frozen=True, kw_only=True)
class Finished:
    """A completed request and its latencies (virtual seconds)."""

    request_id: int
    prompt_tokens: int
    output_tokens: int
    ttft_seconds: float
    tpot_seconds: float
    """Mean time per output token after the first: (finish - first token) / (output - 1); 0 for one token."""
    e2e_seconds: float
    queue_seconds: float


@dataclass(frozen=True, kw_only=True)
class StepResult:
    """What one engine step did."""

    duration_seconds: float
    batch: int
    """Requests scheduled in this step (decodes and prefill chunks)."""
    prefill_tokens: int
    new_tokens: int
    """Tokens sampled: one per decode, one per prefill that completed."""
    preempted: int
    finished: tuple[Finished, ...] = field(default_factory=tuple)


def _idle(preempted: int = 0) -> StepResult:
    return StepResult(duration_seconds=0.0, batch=0, prefill_tokens=0, new_tokens=0, preempted=preempted)


class Engine:
    """Continuous batching with chunked prefill over a virtual clock.

    ``step_seconds(work)`` is one engine step without noise. ``noise`` is the relative standard deviation
    of a step's duration (Gaussian, clipped at +-3 sigma). ``blocks_held(tokens)`` is how many blocks a
    running request of ``tokens`` holds, ``blocks_admitted(tokens)`` how many admitting one takes
    (default, both: ``ceil(tokens / block_size)``, one full-attention group;
    :func:`kvright_dev.sim.physics.build_engine` passes capacity's ``KVCacheLayout``
    ``held_blocks_per_sequence`` and ``admitted_blocks_per_sequence``);
    ``blocks_held`` may grow only where ``tokens`` crosses a multiple of ``block_size``.
    """

    def __init__(
        self,
        *,
        step_seconds: Callable[[StepWork], float],
        max_num_seqs: int,
        num_gpu_blocks: int,
        block_size: int = 16,
        max_model_len: int,
        max_num_batched_tokens: int = 8192,
        noise: float = 0.0,
        seed: int = 0,
        blocks_held: Callable[[int], int] | None = None,
        blocks_admitted: Callable[[int], int] | None = None,
    ) -> None:
        problems = []
        if max_num_seqs < 1:
            problems.append(f"max_num_seqs {max_num_seqs} (accepted: >= 1)")
        if num_gpu_blocks < 1:
            problems.append(f"num_gpu_blocks {num_gpu_blocks} (accepted: >= 1; the model does not fit)")
        if block_size < 1:
            problems.append(f"block_size {block_size} (accepted: >= 1)")
        if max_model_len < 2:
            problems.append(f"max_model_len {max_model_len} (accepted: >= 2)")
        if max_num_batched_tokens < 1:
            problems.append(f"max_num_batched_tokens {max_num_batched_tokens} (accepted: >= 1)")
        if not 0.0 <= noise < 1.0:
            problems.append(f"noise {noise} (accepted: 0 <= noise < 1)")
        if problems:
            raise ValueError("invalid simulator engine: " + "; ".join(problems))
        self.step_seconds = step_seconds
        self.max_num_seqs = max_num_seqs
        self.num_gpu_blocks = num_gpu_blocks
        self.block_size = block_size
        self._blocks_held = blocks_held
        self._blocks_admitted = blocks_admitted
        self.max_model_len = max_model_len
        self.max_num_batched_tokens = max_num_batched_tokens
        self.noise = noise
        self.rng = random.Random(seed)
        self.now = 0.0
        self.steps = 0
        self.free_blocks = num_gpu_blocks - 1  # less the null block
        self.waiting: deque[SimRequest] = deque()
        self.running: dict[int, SimRequest] = {}
        """Admitted requests by id, in admission order (decoding and prefilling)."""
        self.prefilling: dict[int, SimRequest] = {}
        self.decoding = 0
        self.decode_context_tokens = 0
        self.preemptions_total = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self._block_due: dict[int, list[tuple[SimRequest, int]]] = {}
        self._finish_due: dict[int, list[tuple[SimRequest, int]]] = {}
        self._next_id = 0

    # -- inputs ---------------------------------------------------------------------------------
    def validate(self, prompt_tokens: int, max_tokens: int) -> str | None:
        """Why vLLM would reject this request (HTTP 400), or None."""
        if prompt_tokens < 1:
            return f"prompt has {prompt_tokens} tokens; at least 1 is needed"
        if max_tokens < 1:
            return f"max_tokens is {max_tokens}; at least 1 is needed"
        if prompt_tokens + max_tokens > self.max_model_len:
            return (
                f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
                f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the "
                "completion). Please reduce the length of the messages or completion."
            )
        need = max(self._blocks_for(prompt_tokens + max_tokens), self._admission(prompt_tokens + 1))
        if need > self.num_gpu_blocks - 1:
            return f"request needs {need} KV blocks; the cache holds {self.num_gpu_blocks - 1}"
        return None

    def submit(self, *, prompt_tokens: int, max_tokens: int, at: float | None = None) -> SimRequest:
        """Queue a request (call :meth:`validate` first). `at` defaults to the engine's clock."""
        request = SimRequest(
            request_id=self._next_id,
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
            arrival_time=self.now if at is None else max(at, 0.0),
        )
        self._next_id += 1
        self.waiting.append(request)
        return request

    def advance_idle(self, to: float) -> None:
        """Move the clock forward while nothing runs (an idle engine keeps up with the wall clock)."""
        if not self.running and not self.waiting:
            self.now = max(self.now, to)

    # -- state ----------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return bool(self.running or self.waiting)

    @property
    def kv_cache_usage(self) -> float:
        usable = self.num_gpu_blocks - 1
        return (usable - self.free_blocks) / usable if usable else 0.0

    def generated(self, request: SimRequest) -> int:
        """Tokens ``request`` has produced so far."""
        return self.steps - request.offset if request.decoding else request.generated

    def _blocks_for(self, tokens: int) -> int:
        if self._blocks_held is not None:
            return self._blocks_held(tokens)
        return math.ceil(tokens / self.block_size)

    def _admission(self, tokens: int) -> int:
        if self._blocks_admitted is not None:
            return self._blocks_admitted(tokens)
        return self._blocks_for(tokens)

    # -- bookkeeping ----------------------------------------------------------------------------
    def _schedule_block(self, request: SimRequest) -> None:
        # The step at which its context reaches grow_at, so that its next token (context + 1) is the first
        # of a block: context = prompt + steps - offset.
        due = max(self.steps, request.grow_at - request.prompt_tokens + request.offset)
        self._block_due.setdefault(due, []).append((request, request.epoch))

    def _leave(self, request: SimRequest) -> None:
        """Take ``request`` out of the running set and give its blocks back."""
        if request.decoding:
            request.generated = self.steps - request.offset
            self.decoding -= 1
            self.decode_context_tokens -= request.context_tokens
            request.decoding = False
        self.prefilling.pop(request.request_id, None)
        del self.running[request.request_id]
        self.free_blocks += request.blocks
        request.blocks = 0
        request.epoch += 1

    def _preempt_newest(self) -> SimRequest:
        victim = self.running[next(reversed(self.running))]
        self._leave(victim)
        victim.preemptions += 1
        victim.admitted_time = None
        self.waiting.appendleft(victim)
        self.preemptions_total += 1
        return victim

    def _finish(self, request: SimRequest) -> Finished:
        self._leave(request)
        first = request.first_token_time if request.first_token_time is not None else self.now
        n = request.generated
        return Finished(
            request_id=request.request_id,
            prompt_tokens=request.prompt_tokens,
            output_tokens=n,
            ttft_seconds=first - request.arrival_time,
            tpot_seconds=(self.now - first) / (n - 1) if n > 1 else 0.0,
            e2e_seconds=self.now - request.arrival_time,
            queue_seconds=max(0.0, (request.admitted_time or self.now) - request.arrival_time),
        )

    # -- one step -------------------------------------------------------------------------------
    def step(self) -> StepResult:
        """Grow, schedule (decodes, prefill chunks, admissions), price the step, sample, retire."""
        if not self.busy:
            return _idle()
        start = self.now
        preempted = 0
        # Grow: decoding requests whose next token starts a block take what it needs; short, preempt.
        for request, epoch in self._block_due.pop(self.steps, ()):
            if request.epoch != epoch:
                continue  # preempted or finished since
            need = self._blocks_for(request.grow_at + 1) - request.blocks
            while self.free_blocks < need and request.epoch == epoch:
                self._preempt_newest()
                preempted += 1
            if request.epoch == epoch:
                self.free_blocks -= max(need, 0)
                request.blocks += max(need, 0)
                request.grow_at += self.block_size
                self._schedule_block(request)
        # Schedule: decodes take a token each, then prefill chunks of running requests, then admissions.
        budget = max(0, self.max_num_batched_tokens - self.decoding)
        chunks: list[tuple[SimRequest, int]] = []
        for request in self.prefilling.values():
            if budget <= 0:
                break
            chunk = min(request.prefill_target - request.prefilled, budget)
            chunks.append((request, chunk))
            budget -= chunk
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            head = self.waiting[0]
            need = self._admission(head.context_tokens + 1)
            if need > self.free_blocks:
                break
            self.waiting.popleft()
            self.free_blocks -= need
            head.blocks = need
            head.admitted_time = start
            head.prefill_target = head.context_tokens  # recompute: prompt plus what it had produced
            head.prefilled = 0
            self.running[head.request_id] = head
            self.prefilling[head.request_id] = head
            chunk = min(head.prefill_target, budget)
            chunks.append((head, chunk))
            budget -= chunk
        decodes = self.decoding
        if decodes == 0 and not chunks:
            return _idle(preempted)  # nothing fits (cannot happen after validate); do not spin
        prefill_tokens = sum(c for _, c in chunks)
        work = StepWork(
            decode_seqs=decodes,
            decode_context_tokens=self.decode_context_tokens,
            prefill_tokens=prefill_tokens,
            prefill_context_tokens=sum(c * (r.prefilled + c / 2.0) for r, c in chunks),
        )
        duration = self.step_seconds(work)
        if self.noise > 0:
            jitter = max(-3.0, min(3.0, self.rng.gauss(0.0, 1.0)))
            duration *= max(0.05, 1.0 + self.noise * jitter)
        self.now = start + duration
        self.steps += 1
        self.decode_context_tokens += decodes
        new_tokens = decodes
        finished = [
            self._finish(request)
            for request, epoch in self._finish_due.pop(self.steps, ())
            if request.epoch == epoch
        ]
        for request, chunk in chunks:
            request.prefilled += chunk
            if request.prefilled < request.prefill_target:
                continue
            # The prefill is complete: this step samples its next token, and blocks the request no longer
            # needs (behind a sliding window) go back.
            del self.prefilling[request.request_id]
            if request.preemptions == 0:
                self.prompt_tokens_total += request.prompt_tokens
            request.generated += 1
            new_tokens += 1
            if request.first_token_time is None:
                request.first_token_time = self.now
            if request.generated >= request.max_tokens:
                finished.append(self._finish(request))
                continue
            held = self._blocks_for(request.context_tokens)
            if held < request.blocks:
                self.free_blocks += request.blocks - held
                request.blocks = held
            request.decoding = True
            request.offset = self.steps - request.generated
            self.decoding += 1
            self.decode_context_tokens += request.context_tokens
            # Admitted with blocks for its context then (one token fewer than now): the next check is at
            # the first multiple of block_size at or past its context.
            request.grow_at = -(-request.context_tokens // self.block_size) * self.block_size
            self._schedule_block(request)
            self._finish_due.setdefault(request.offset + request.max_tokens, []).append(
                (request, request.epoch)
            )
        self.generation_tokens_total += new_tokens
        return StepResult(
            duration_seconds=duration,
            batch=decodes + len(chunks),
            prefill_tokens=prefill_tokens,
            new_tokens=new_tokens,
            preempted=preempted,
            finished=tuple(finished),
        )
