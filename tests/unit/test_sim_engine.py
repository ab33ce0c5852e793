"""kvright_dev.sim.engine: continuous batching, chunked prefill, the queue, KV blocks and preemption.

Pure: the engine runs on its virtual clock with a hand-checkable step model
(10 ms per step + 1 ms per decoded sequence; prefill 1 ms per 100 prompt tokens). Nothing is faked.
"""

from __future__ import annotations

import pytest

from kvright_dev.sim.engine import Engine, Finished, StepWork


def decode(batch: int, context: float) -> float:
    return 0.010 + 0.001 * batch


def prefill(tokens: int) -> float:
    return tokens / 100_000.0


def step_seconds(work: StepWork) -> float:
    return decode(work.decode_seqs, work.decode_context_tokens) + prefill(work.prefill_tokens)


def engine(**kw: int | float) -> Engine:
    args: dict[str, int | float] = {"max_num_seqs": 4, "num_gpu_blocks": 1000, "max_model_len": 4096}
    args.update(kw)
    return Engine(
        step_seconds=step_seconds,
        max_num_seqs=int(args["max_num_seqs"]),
        max_num_batched_tokens=int(args.get("max_num_batched_tokens", 8192)),
        num_gpu_blocks=int(args["num_gpu_blocks"]),
        max_model_len=int(args["max_model_len"]),
        noise=float(args.get("noise", 0.0)),
        seed=int(args.get("seed", 0)),
    )


def run_to_idle(e: Engine, limit: int = 100_000) -> list[int]:
    batches: list[int] = []
    for _ in range(limit):
        if not e.busy:
            return batches
        batches.append(e.step().batch)
    raise AssertionError("engine did not drain")


def test_single_request_latencies_follow_the_step_model() -> None:
    e = engine()
    e.submit(prompt_tokens=1000, max_tokens=5)
    steps = [e.step() for _ in range(5)]
    done = steps[-1].finished[0]
    # First step: the prefill alone (10 ms step + 10 ms of prompt) samples the first token; then four
    # decode steps of 11 ms.
    assert done.ttft_seconds == pytest.approx(0.020)
    assert done.tpot_seconds == pytest.approx(0.011)
    assert done.e2e_seconds == pytest.approx(0.020 + 4 * 0.011)
    assert done.output_tokens == 5
    assert not e.busy
    assert e.free_blocks == 999  # every block back but the null block, which vLLM never hands out
    assert (e.prompt_tokens_total, e.generation_tokens_total) == (1000, 5)


def test_batch_is_capped_at_max_num_seqs_and_the_rest_waits() -> None:
    e = engine(max_num_seqs=4)
    for _ in range(10):
        e.submit(prompt_tokens=10, max_tokens=3)
    first = e.step()
    assert first.batch == 4
    assert (len(e.running), len(e.waiting)) == (4, 6)
    batches = [first.batch, *run_to_idle(e)]
    assert max(batches) == 4
    assert sum(batches) == 30  # every token of every request, exactly once


def test_tpot_grows_with_the_batch() -> None:
    alone = engine(max_num_seqs=8)
    alone.submit(prompt_tokens=10, max_tokens=20)
    crowd = engine(max_num_seqs=8)
    for _ in range(8):
        crowd.submit(prompt_tokens=10, max_tokens=20)

    def tpots(e: Engine) -> list[float]:
        out = []
        while e.busy:
            out += [f.tpot_seconds for f in e.step().finished]
        return out

    assert tpots(alone) == [pytest.approx(0.011)]
    assert tpots(crowd) == [pytest.approx(0.018)] * 8


def test_a_long_prompt_is_chunked_and_decodes_keep_running_beside_it() -> None:
    # A 256-token budget: the decoding request takes 1 token per step, the 1000-token prompt the rest.
    e = engine(max_num_batched_tokens=256)
    e.submit(prompt_tokens=10, max_tokens=50)
    e.step()  # the short one is prefilled and decodes from now on
    e.submit(prompt_tokens=1000, max_tokens=2)
    chunks = [e.step().prefill_tokens for _ in range(4)]
    assert chunks == [255, 255, 255, 235]
    long = e.running[1]
    assert long.first_token_time == pytest.approx(e.now)  # the step that completed the prompt sampled
    assert e.generated(e.running[0]) == 5  # one token per step throughout, never stalled


def test_admission_waits_for_kv_blocks() -> None:
    # 10 blocks of 16 tokens, one of them the null block: a 100-token prompt needs 7 blocks, so the second
    # one must wait.
    e = engine(max_num_seqs=4, num_gpu_blocks=10)
    e.submit(prompt_tokens=100, max_tokens=2)
    e.submit(prompt_tokens=100, max_tokens=2)
    assert e.step().batch == 1
    assert len(e.waiting) == 1
    assert e.kv_cache_usage == pytest.approx(7 / 9)  # vLLM's usage leaves the null block out


def test_running_out_of_blocks_preempts_the_newest_and_recomputes_it() -> None:
    # Two sequences start at 3 blocks each (48 tokens with room for one more); 7 blocks in all, one the
    # null block.
    e = engine(max_num_seqs=2, num_gpu_blocks=7)
    e.submit(prompt_tokens=47, max_tokens=40)
    e.submit(prompt_tokens=47, max_tokens=40)
    finished: list[Finished] = []
    preempted = 0
    prefill_tokens = 0
    while e.busy:
        step = e.step()
        preempted += step.preempted
        prefill_tokens += step.prefill_tokens
        finished += step.finished
    assert preempted >= 1
    assert e.preemptions_total == preempted
    assert sorted(f.output_tokens for f in finished) == [40, 40]
    assert prefill_tokens > 2 * 47  # the preempted one was prefilled again, with its generated tokens
    assert e.prompt_tokens_total == 94  # recomputation is not new prompt traffic
    assert e.free_blocks == 6


@pytest.mark.parametrize(
    ("prompt", "max_tokens", "fragment"),
    [
        (0, 10, "at least 1"),
        (10, 0, "max_tokens is 0"),
        (4000, 200, "maximum context length is 4096 tokens"),
        (1500, 100, "needs 100 KV blocks; the cache holds 49"),
    ],
    ids=["empty-prompt", "no-output", "longer-than-max-model-len", "larger-than-the-kv-cache"],
)
def test_requests_vllm_would_reject(prompt: int, max_tokens: int, fragment: str) -> None:
    e = engine(num_gpu_blocks=50)
    problem = e.validate(prompt, max_tokens)
    assert problem is not None and fragment in problem


def test_noise_is_seeded_and_bounded() -> None:
    def durations(seed: int) -> list[float]:
        e = engine(noise=0.1, seed=seed, max_num_seqs=1)
        e.submit(prompt_tokens=1, max_tokens=200)
        return [e.step().duration_seconds for _ in range(200)]

    a, b, c = durations(1), durations(1), durations(2)
    assert a == b and a != c
    decode_only = a[1:]
    assert all(0.011 * 0.7 - 1e-12 <= d <= 0.011 * 1.3 + 1e-12 for d in decode_only)
    assert len(set(decode_only)) > 100


def test_idle_engine_follows_the_wall_clock_but_a_busy_one_does_not_jump() -> None:
    e = engine()
    e.advance_idle(5.0)
    assert e.now == 5.0
    e.submit(prompt_tokens=10, max_tokens=2)
    e.advance_idle(9.0)
    assert e.now == 5.0


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"max_num_seqs": 0}, "max_num_seqs 0"),
        ({"num_gpu_blocks": 0}, "model does not fit"),
        ({"noise": 1.5}, "noise"),
    ],
    ids=["no-seats", "no-blocks", "noise-out-of-range"],
)
def test_bad_engine_parameters_are_refused(kw: dict[str, float], fragment: str) -> None:
    with pytest.raises(ValueError, match="invalid simulator engine") as info:
        engine(**kw)
    assert fragment in str(info.value)
