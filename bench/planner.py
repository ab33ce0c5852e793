"""Planner benchmark: in-process plan latency for a 70B model, and ``kvright plan --json`` as a whole process,
side by side with a peer planner when one is installed here.

Targets (issue 2): in-process median <= 5 ms over all candidates; whole process <= 0.5 s. Loops are bounded
in count and in time. The peer is NVIDIA's ``aiconfigurator`` CLI, found on PATH or through
``KVRIGHT_BENCH_AICONFIGURATOR`` (path to its executable); when it is absent the output says so and why.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import capacity

#: The planned case, asked of both planners: Llama-3.1-70B on one node of 8 H100 SXM, prompts of 4096 and
#: outputs of 1024 tokens, TPOT within 50 ms; kvright weighs every TP x KV-dtype x batched-token candidate.
MODEL = "llama-3.1-70b"
GPU = "h100-sxm"
PROMPT_TOKENS = 4096
OUTPUT_TOKENS = 1024
TPOT_MS = 50
PLAN_ARGS = [
    "--gpu",
    GPU,
    "--max-model-len",
    "8192",
    "--prompt-tokens",
    str(PROMPT_TOKENS),
    "--output-tokens",
    str(OUTPUT_TOKENS),
    "--tpot-ms",
    str(TPOT_MS),
    "--max-gpus",
    "8",
    "--json",
]

#: meta-llama/Llama-3.1-70B-Instruct's config.json (the fields a Hugging Face loader needs); the peer reads a
#: local folder because the hub is not reachable from here.
LLAMA_31_70B_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "hidden_act": "silu",
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 64,
    "num_hidden_layers": 80,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
    "bos_token_id": 128000,
    "eos_token_id": 128009,
}

IN_PROCESS_RUNS = 300
IN_PROCESS_BUDGET_SECONDS = 20.0
PROCESS_RUNS = 15
PROCESS_BUDGET_SECONDS = 60.0
PEER_RUNS = 3
PEER_TIMEOUT_SECONDS = 120.0

IN_PROCESS_TARGET_SECONDS = 0.005
PROCESS_TARGET_SECONDS = 0.5


@dataclass(frozen=True, kw_only=True)
class Timing:
    """Wall-clock samples of one measured thing."""

    name: str
    """What was timed."""
    samples: tuple[float, ...]
    """Seconds per run."""

    @property
    def median_seconds(self) -> float:
        """Median of the samples."""
        return statistics.median(self.samples)

    @property
    def p90_seconds(self) -> float:
        """90th percentile (nearest rank)."""
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def machine() -> str:
    """CPU model and core count of this machine."""
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical cores, Python {platform.python_version()}, {platform.system()}"


def _bounded(run: Callable[[], None], runs: int, budget_seconds: float) -> tuple[float, ...]:
    samples: list[float] = []
    deadline = time.perf_counter() + budget_seconds
    for _ in range(runs):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
        if time.perf_counter() > deadline:
            break
    return tuple(samples)


def in_process() -> Timing:
    """``capacity.plan`` over all candidates with architecture and GPU already loaded, as in the operator."""
    arch = capacity.catalog_architecture(MODEL)
    gpu = capacity.gpu_spec(GPU)
    workload = capacity.Workload(max_model_len=8192, prompt_tokens=PROMPT_TOKENS, output_tokens=OUTPUT_TOKENS)
    slo = capacity.SLO(tpot_seconds=TPOT_MS / 1e3)
    limits = capacity.Limits(max_gpus=8)

    def run() -> None:
        result = capacity.plan(arch, gpu, workload, slo, limits)
        assert result.feasible

    for _ in range(5):  # warm caches the way a long-running operator has them
        run()
    return Timing(
        name="capacity.plan (in-process)", samples=_bounded(run, IN_PROCESS_RUNS, IN_PROCESS_BUDGET_SECONDS)
    )


def _process(
    name: str,
    argv: Sequence[str],
    runs: int,
    budget: float,
    timeout: float,
    env: dict[str, str] | None = None,
) -> Timing:
    def run() -> None:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False, env=env
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{name} exited {proc.returncode}: {proc.stderr.strip()[-300:]}")

    return Timing(name=name, samples=_bounded(run, runs, budget))


def kvright_process() -> Timing:
    """``kvright plan ... --json`` as a fresh process (interpreter start, imports, plan, JSON)."""
    exe = shutil.which("kvright", path=os.path.dirname(sys.executable)) or shutil.which("kvright")
    argv = (
        [exe, "plan", MODEL, *PLAN_ARGS]
        if exe
        else [sys.executable, "-m", "kvright", "plan", MODEL, *PLAN_ARGS]
    )
    return _process("kvright plan --json (whole process)", argv, PROCESS_RUNS, PROCESS_BUDGET_SECONDS, 30)


def peer() -> tuple[Timing | None, str]:
    """aiconfigurator's CLI on the closest equivalent question, or None and why it could not run."""
    exe = os.environ.get("KVRIGHT_BENCH_AICONFIGURATOR") or shutil.which("aiconfigurator")
    if not exe:
        return None, (
            "aiconfigurator is not installed here (set KVRIGHT_BENCH_AICONFIGURATOR to its executable); "
            "see docs/capacity.md for the install attempt"
        )
    # The same question: aggregated vLLM serving on 8 H100 SXM, ISL/OSL and TPOT as above.
    with tempfile.TemporaryDirectory(prefix="kvright-bench-") as tmp:
        model_dir = os.path.join(tmp, "Llama-3.1-70B")
        os.makedirs(model_dir)
        with open(os.path.join(model_dir, "config.json"), "w", encoding="utf-8") as handle:
            json.dump(LLAMA_31_70B_CONFIG, handle)
        argv = [
            exe,
            "cli",
            "default",
            "--model-path",
            model_dir,
            "--total-gpus",
            "8",
            "--system",
            "h100_sxm",
            "--backend",
            "vllm",
            "--serving-mode",
            "agg",
            "--isl",
            str(PROMPT_TOKENS),
            "--osl",
            str(OUTPUT_TOKENS),
            "--tpot",
            str(TPOT_MS),
            "--save-dir",
            os.path.join(tmp, "out"),
        ]
        env = dict(os.environ, AICONFIGURATOR_LOG_LEVEL="ERROR")
        try:
            timing = _process(
                "aiconfigurator cli default (whole process)",
                argv,
                PEER_RUNS,
                PEER_TIMEOUT_SECONDS * 3,
                PEER_TIMEOUT_SECONDS,
                env,
            )
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            return (
                None,
                f"aiconfigurator is installed but did not complete: {' '.join(str(exc).split())[:300]}",
            )
    return timing, ""


def report() -> int:
    """Run everything and print the table; exit 1 if a target is missed."""
    print(f"machine: {machine()}")
    print(
        f"case: {MODEL} on up to 8 x {GPU}, prompt {PROMPT_TOKENS} / output {OUTPUT_TOKENS} tokens, "
        f"TPOT <= {TPOT_MS} ms; kvright weighs every TP x KV-dtype x batched-token candidate"
    )
    fast = in_process()
    whole = kvright_process()
    other, why = peer()
    rows = [fast, whole] + ([other] if other else [])
    width = max(len(t.name) for t in rows)
    print(f"{'what':<{width}}  {'runs':>5}  {'median':>10}  {'p90':>10}")
    for t in rows:
        print(
            f"{t.name:<{width}}  {len(t.samples):>5}  {_fmt(t.median_seconds):>10}  {_fmt(t.p90_seconds):>10}"
        )
    ok_fast = fast.median_seconds <= IN_PROCESS_TARGET_SECONDS
    ok_whole = whole.median_seconds <= PROCESS_TARGET_SECONDS
    print(
        f"in-process target {_fmt(IN_PROCESS_TARGET_SECONDS)}: {'met' if ok_fast else 'MISSED'} "
        f"({IN_PROCESS_TARGET_SECONDS / fast.median_seconds:.1f}x headroom)"
    )
    print(
        f"whole-process target {_fmt(PROCESS_TARGET_SECONDS)}: {'met' if ok_whole else 'MISSED'} "
        f"({PROCESS_TARGET_SECONDS / whole.median_seconds:.1f}x headroom)"
    )
    if other:
        print(
            "ratio aiconfigurator / kvright (whole process, median): "
            f"{other.median_seconds / whole.median_seconds:.1f}x"
        )
    else:
        print(f"peer: {why}")
    return 0 if ok_fast and ok_whole else 1


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"
