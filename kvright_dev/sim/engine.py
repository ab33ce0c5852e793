"""The simulated vLLM engine core: continuous batching, a FCFS queue, KV blocks and preemption.

Pure and deterministic given its inputs: time is a virtual clock advanced by the modelled step
durations (seeded noise included), never read from the system. :mod:`kvright_dev.sim.server` drives it
from a thread and paces it against the wall clock; :mod:`bench.control_loop` drives it directly.

The scheduling model follows vLLM V1 in the respects that matter for latency and capacity:
- at most ``max_num_seqs`` requests run; the rest wait in arrival order;
- a request is admitted only when the free KV blocks hold its prompt plus one token
  (blocks of ``block_size`` tokens, allocated as the sequence grows);
- each step decodes one token for every running request; a newly admitted request has its prompt
  prefilled in that step (the step takes longer by the prefill time) and emits its first token;
  a step admits prompts only while they fit ``max_num_batched_tokens`` together with the decodes
  (vLLM's per-step token budget; a prompt larger than the budget is admitted alone, where vLLM would
  chunk it over several steps);
- when a running request needs a new block and none is free, the most recently admitted request is
  preempted (recompute mode: its blocks are freed, it goes back to the head of the queue, and its
  prompt plus the tokens it already produced are prefilled again on readmission).
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Engine", "Finished", "SimRequest", "StepResult"]


@dataclass(kw_only=True)
class SimRequest:
    """One request inside the engine (mutable engine state)."""

    request_id: int
    prompt_tokens: int
    max_tokens: int
    arrival_time: float
    generated: int = 0
    blocks: int = 0
    first_token_time: float | None = None
    admitted_time: float | None = None
    preemptions: int = 0

    @property
    def context_tokens(self) -> int:
        return self.prompt_tokens + self.generated


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
    """Requests that produced a token in this step."""
    prefill_tokens: int
    new_tokens: int
    preempted: int
    finished: tuple[Finished, ...] = field(default_factory=tuple)


class Engine:
    """Continuous batching over a virtual clock.

    ``step_seconds(batch, mean_context_tokens, prefill_tokens)`` is one engine step without noise:
    ``batch`` decodes at that mean context plus ``prefill_tokens`` of prompts in the same step.
    ``noise`` is the relative standard deviation of a step's duration (Gaussian, clipped at +-3 sigma).
    """

    def __init__(
        self,
        *,
        step_seconds: Callable[[int, float, int], float],
        max_num_seqs: int,
        num_gpu_blocks: int,
        block_size: int = 16,
        max_model_len: int,
        max_num_batched_tokens: int = 8192,
        noise: float = 0.0,
        seed: int = 0,
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
        self.max_model_len = max_model_len
        self.max_num_batched_tokens = max_num_batched_tokens
        self.noise = noise
        self.rng = random.Random(seed)
        self.now = 0.0
        self.free_blocks = num_gpu_blocks
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.preemptions_total = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
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
        if self._blocks_for(prompt_tokens + max_tokens) > self.num_gpu_blocks:
            return (
                f"request needs {self._blocks_for(prompt_tokens + max_tokens)} KV blocks; "
                f"the cache holds {self.num_gpu_blocks}"
            )
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
        return (self.num_gpu_blocks - self.free_blocks) / self.num_gpu_blocks

    def _blocks_for(self, tokens: int) -> int:
        return math.ceil(tokens / self.block_size)

    # -- one step -------------------------------------------------------------------------------
    def step(self) -> StepResult:
        """Admit, prefill, decode one token for every running request, retire finished ones."""
        if not self.busy:
            return StepResult(duration_seconds=0.0, batch=0, prefill_tokens=0, new_tokens=0, preempted=0)
        start = self.now
        preempted = 0
        # Grow: every running request needs room for the token it is about to produce.
        index = 0
        while index < len(self.running):
            request = self.running[index]
            need = self._blocks_for(request.context_tokens + 1) - request.blocks
            if need <= self.free_blocks:
                self.free_blocks -= need
                request.blocks += need
                index += 1
                continue
            # Out of blocks: preempt the most recently admitted request (possibly this one) and retry.
            victim = self.running.pop()
            self.free_blocks += victim.blocks
            victim.blocks = 0
            victim.preemptions += 1
            victim.admitted_time = None
            self.waiting.appendleft(victim)
            self.preemptions_total += 1
            preempted += 1
        # Admit from the head of the queue while seats and blocks last.
        prefill_tokens = 0
        admitted: list[SimRequest] = []
        token_budget = self.max_num_batched_tokens - len(self.running)
        while self.waiting and len(self.running) < self.max_num_seqs:
            head = self.waiting[0]
            need = self._blocks_for(head.context_tokens + 1)
            if need > self.free_blocks:
                break
            if admitted and prefill_tokens + head.context_tokens > token_budget:
                break  # the step's token budget is spent; the rest waits for the next step
            self.waiting.popleft()
            self.free_blocks -= need
            head.blocks = need
            head.admitted_time = start
            prefill_tokens += head.context_tokens  # recompute: prompt plus what it had produced
            self.running.append(head)
            admitted.append(head)
        batch = len(self.running)
        if batch == 0:
            # Nothing fits (cannot happen after validate); do not spin.
            return StepResult(
                duration_seconds=0.0, batch=0, prefill_tokens=0, new_tokens=0, preempted=preempted
            )
        mean_context = sum(r.context_tokens for r in self.running) / batch
        duration = self.step_seconds(batch, mean_context, prefill_tokens)
        if self.noise > 0:
            jitter = max(-3.0, min(3.0, self.rng.gauss(0.0, 1.0)))
            duration *= max(0.05, 1.0 + self.noise * jitter)
        self.now = start + duration
        self.prompt_tokens_total += sum(r.prompt_tokens for r in admitted if r.preemptions == 0)
        finished: list[Finished] = []
        still: list[SimRequest] = []
        for request in self.running:
            request.generated += 1
            if request.first_token_time is None:
                request.first_token_time = self.now
            if request.generated >= request.max_tokens:
                self.free_blocks += request.blocks
                request.blocks = 0
                first = request.first_token_time
                tpot = (self.now - first) / (request.generated - 1) if request.generated > 1 else 0.0
                finished.append(
                    Finished(
                        request_id=request.request_id,
                        prompt_tokens=request.prompt_tokens,
                        output_tokens=request.generated,
                        ttft_seconds=first - request.arrival_time,
                        tpot_seconds=tpot,
                        e2e_seconds=self.now - request.arrival_time,
                        queue_seconds=max(0.0, (request.admitted_time or start) - request.arrival_time),
                    )
                )
            else:
                still.append(request)
        self.running = still
        self.generation_tokens_total += batch
        return StepResult(
            duration_seconds=duration,
            batch=batch,
            prefill_tokens=prefill_tokens,
            new_tokens=batch,
            preempted=preempted,
            finished=tuple(finished),
        )
