"""kvright_dev.sim.physics: the simulator's own step timing, GPU profiles and cold start.

Pure: real architecture facts from the catalog (Llama-3.1-8B and 70B on H100), the simulator's engine on
its virtual clock. Nothing is faked. kvright's serving model appears only as the reference the nominal
profile is compared with, never as the simulator's timing.
"""

from __future__ import annotations

import random
from dataclasses import fields, replace

import pytest

import capacity
from kvright_dev.sim.engine import Engine, Finished, StepWork
from kvright_dev.sim.physics import (
    RANGES,
    GPUProfile,
    ModelFacts,
    build_engine,
    cold_start_seconds,
    step_function,
)
from kvright_dev.sim.server import parse_command_line

H100 = capacity.gpu_spec("h100-sxm")
LLAMA_8B = capacity.load_architecture("llama-3.1-8b")
LLAMA_70B = capacity.load_architecture("llama-3.1-70b")


def facts(arch: capacity.Architecture = LLAMA_8B, tp: int = 1) -> ModelFacts:
    return ModelFacts.of(arch, H100, tensor_parallel_size=tp, kv_cache_dtype="auto")


def work(decodes: int, context: int = 1000, prefill: int = 0) -> StepWork:
    return StepWork(
        decode_seqs=decodes,
        decode_context_tokens=decodes * context,
        prefill_tokens=prefill,
        prefill_context_tokens=prefill * prefill / 2.0,
    )


def engine(profile: GPUProfile, *, blocks: int = 20_000, seqs: int = 64, mnbt: int = 2048) -> Engine:
    return Engine(
        step_seconds=step_function(facts(), profile),
        max_num_seqs=seqs,
        num_gpu_blocks=blocks,
        max_model_len=8192,
        max_num_batched_tokens=mnbt,
        noise=profile.step_noise,
        seed=7,
    )


@pytest.mark.parametrize(
    ("overhead_ms", "expected_ms"),
    [(2.0, 2.0 + 5.213), (12.0, 12.0 + 5.213)],
    ids=["small-overhead", "large-overhead-dominates-batch-1"],
)
def test_fixed_step_overhead_shows_at_batch_one(overhead_ms: float, expected_ms: float) -> None:
    # Batch 1 of Llama-3.1-8B: 15.01 GB of weights (embedding excluded) at 0.875 x 3.35 TB/s is 5.12 ms,
    # 1000 tokens of KV (128 KiB each) 0.045 ms, 32 layers x 1.5 us per sequence 0.048 ms; plus the overhead.
    profile = GPUProfile(step_overhead_seconds=overhead_ms / 1000.0)
    step = step_function(facts(), profile)(work(1)) * 1000.0
    assert step == pytest.approx(expected_ms, abs=0.01)


def test_weight_reads_and_kv_reads_have_separate_efficiencies() -> None:
    f = facts()
    base = step_function(f, GPUProfile())
    slow_kv = step_function(f, GPUProfile(kv_read_efficiency=0.4375))  # half the KV bandwidth
    slow_weights = step_function(f, GPUProfile(weight_read_efficiency=0.4375))
    short, long = work(64, context=128), work(64, context=4096)
    # Halving KV efficiency doubles exactly the KV term, which grows with the context; weights do not.
    kv_long = long.decode_context_tokens * f.kv_bytes_per_token_per_gpu / (H100.hbm_bytes_per_second * 0.875)
    assert slow_kv(long) - base(long) == pytest.approx(kv_long)
    assert slow_kv(long) - base(long) > 10 * (slow_kv(short) - base(short))
    assert slow_weights(short) - base(short) == pytest.approx(slow_weights(long) - base(long))


def test_a_prefill_chunk_slows_every_decode_in_its_step() -> None:
    step = step_function(facts(), GPUProfile())
    decode_only = step(work(32))
    mixed = step(work(32, prefill=2048))
    prefill_only = step(work(0, prefill=2048))
    assert mixed > 2.5 * decode_only  # the chunk's GEMMs are compute-bound: the decodes wait for them
    # Not overlapped: the mixed step costs more than the longer of the two alone.
    assert mixed > max(decode_only, prefill_only)


def test_chunked_prefill_interference_shows_in_the_tpot_of_running_requests() -> None:
    def tpot_with(prompts: int) -> float:
        e = engine(GPUProfile(step_noise=0.0))
        for _ in range(8):
            e.submit(prompt_tokens=200, max_tokens=200)
        for i in range(prompts):
            e.submit(prompt_tokens=4000, max_tokens=2, at=0.1 * i)
        done: list[Finished] = []
        for _ in range(10_000):
            if not e.busy:
                break
            done += e.step().finished
        return max(f.tpot_seconds for f in done if f.output_tokens == 200)

    assert tpot_with(12) > 1.3 * tpot_with(0)


def test_preemption_when_kv_blocks_run_out_and_none_with_room() -> None:
    def run(blocks: int) -> tuple[int, list[int]]:
        e = engine(GPUProfile(step_noise=0.0), blocks=blocks, seqs=16)
        for _ in range(16):
            e.submit(prompt_tokens=300, max_tokens=400)
        outputs: list[int] = []
        for _ in range(50_000):
            if not e.busy:
                break
            outputs += [f.output_tokens for f in e.step().finished]
        return e.preemptions_total, outputs

    # 16 x 700 tokens need 16 x 44 = 704 blocks at the end; 400 blocks hold them only at the start.
    tight_preemptions, tight_outputs = run(400)
    roomy_preemptions, roomy_outputs = run(2000)
    assert tight_preemptions > 0
    assert roomy_preemptions == 0
    assert tight_outputs == roomy_outputs == [400] * 16  # recomputed, not lost or cut short


def test_a_sliding_window_model_runs_the_sequences_capacity_plans() -> None:
    # Gemma 3 27B: 52 of its 62 layers slide over 1,024 tokens. vLLM's layout (capacity's) puts them in six
    # sliding groups beside one full-attention group; a running 6,000-token request holds 765 blocks (375
    # full, 65 in each sliding group: vLLM frees those behind the window), while the one being admitted
    # reserves its whole 5,800-token prompt, one chunk under the 8,192-token budget, in every group: 2,625.
    # In 8,000 blocks (one the null block) capacity plans 1 + (7,999 - 2,625) // 765 = 8 sequences. A
    # simulator that counts the cache as one group of 16-token blocks (375 a request) runs all 12 at once.
    blocks, prompt, output = 8000, 5800, 200
    flags = f"--gpu h100-sxm --max-model-len 8192 --num-gpu-blocks-override {blocks} --max-num-seqs 64"
    args = parse_command_line(["serve", "gemma-3-27b", *flags.split()])
    e, _ = build_engine(args)
    layout = capacity.kv_cache_layout(
        capacity.load_architecture("gemma-3-27b"),
        max_num_batched_tokens=capacity.default_max_num_batched_tokens(H100),
    )
    planned = layout.sequences(blocks, prompt + output)
    assert (layout.held_blocks_per_sequence(6000), layout.admitted_blocks_per_sequence(6000)) == (765, 2625)
    assert planned == 8
    for _ in range(12):
        e.submit(prompt_tokens=prompt, max_tokens=output)
    peak, outputs = 0, []
    for _ in range(20_000):
        if not e.busy:
            break
        outputs += [f.output_tokens for f in e.step().finished]
        peak = max(peak, len(e.running))
    assert peak == planned
    assert e.preemptions_total == 0
    assert outputs == [output] * 12


def test_cold_start_is_the_fixed_part_plus_weights_over_the_load_bandwidth() -> None:
    f = facts(LLAMA_70B, tp=4)
    profile = GPUProfile(cold_start_fixed_seconds=30.0, load_bytes_per_second=1e9)
    assert cold_start_seconds(f, profile) == pytest.approx(30.0 + f.weight_bytes_per_gpu / 1e9)
    assert 30.0 + 30.0 < cold_start_seconds(f, profile) < 30.0 + 40.0  # ~35 GB per GPU at TP 4


def test_draws_stay_within_the_documented_ranges_and_vary() -> None:
    rng = random.Random(3)
    draws = [GPUProfile.draw(rng) for _ in range(300)]
    names = {f.name for f in fields(GPUProfile)}
    assert set(RANGES) == names  # every field has a documented range
    for name, (low, high) in RANGES.items():
        values = [getattr(d, name) for d in draws]
        assert all(low <= v <= high for v in values), name
        assert max(values) - min(values) > 0.5 * (high - low), name  # the range is actually explored
    # The nominal profile lies inside the ranges too.
    nominal = GPUProfile.nominal()
    assert all(low <= getattr(nominal, n) <= high for n, (low, high) in RANGES.items())


def test_a_seed_draws_one_profile_and_one_engine_history() -> None:
    a, b, c = (GPUProfile.draw(random.Random(s)) for s in (5, 5, 6))
    assert a == b and a != c

    def durations(profile: GPUProfile) -> list[float]:
        e = engine(profile)
        for i in range(20):
            e.submit(prompt_tokens=500 + 10 * i, max_tokens=50)
        return [e.step().duration_seconds for _ in range(60)]

    assert durations(a) == durations(b)
    assert durations(a) != durations(c)


def test_efficiency_scales_every_step_but_not_the_cold_start() -> None:
    f = facts(LLAMA_70B, tp=4)
    nominal, half = GPUProfile(), GPUProfile().scaled(0.5)
    for w in (work(1), work(48, prefill=1024), work(128, context=3000)):
        assert step_function(f, half)(w) == pytest.approx(2 * step_function(f, nominal)(w))
    assert cold_start_seconds(f, half) == cold_start_seconds(f, nominal)


@pytest.mark.parametrize(
    ("profile", "fragment"),
    [
        (dict(weight_read_efficiency=0.0), "weight_read_efficiency"),
        (dict(kv_memory_fraction=1.5), "kv_memory_fraction"),
        (dict(step_noise=1.0), "step_noise"),
    ],
    ids=["zero-efficiency", "more-memory-than-there-is", "noise-out-of-range"],
)
def test_bad_profiles_are_refused(profile: dict[str, float], fragment: str) -> None:
    with pytest.raises(ValueError, match="invalid GPU profile") as info:
        replace(GPUProfile(), **profile)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("arch", "tp"), [(LLAMA_8B, 1), (LLAMA_70B, 4)], ids=["llama-8b-tp1", "llama-70b-tp4"]
)
def test_the_nominal_profile_is_near_kvrights_model(arch: capacity.Architecture, tp: int) -> None:
    """The end-to-end test's "exact" case needs a plan sized by the model to run as predicted on the
    nominal profile: within 10 % on decode and mixed steps (the shapes differ, the scale does not)."""
    sim = step_function(facts(arch, tp), GPUProfile.nominal())
    model = capacity.ServingModel(
        arch,
        H100,
        capacity.EngineConfig(layout=capacity.Layout(tensor_parallel_size=tp), max_num_batched_tokens=8192),
    )
    for batch, context, prefill in ((1, 1000, 0), (48, 1100, 0), (128, 1100, 0), (48, 1100, 1024)):
        predicted = model.step_seconds(batch, context, prefill, prompt_tokens=prefill)
        simulated = sim(work(batch, context, prefill))
        assert simulated == pytest.approx(predicted, rel=0.10), (batch, context, prefill)
