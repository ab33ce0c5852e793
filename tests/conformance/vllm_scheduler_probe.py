"""Drive real vLLM engines' schedulers with identical requests and report how many run at once.

Runs in the vLLM venv's python. Reads a JSON list of cases from stdin, each
``{"id": str, "model": folder with config.json, "kv_cache_memory_bytes": int, "max_model_len": int,
"max_num_batched_tokens": int, "max_num_seqs": int, "requests": int, "prompt_tokens": int,
"max_tokens": int}``, and writes one JSON list to stdout, one answer per case:

    {"id", "started": bool, "error": one line or null, "num_blocks": int or null,
     "block_size": the engine's block size, "max_num_batched_tokens": int, "max_in_flight_tokens": int,
     "groups": [{"manager", "block_size", "sliding_window" or null}],
     "peak_running": most requests running after one schedule() call,
     "peak_used_blocks": most blocks taken from the pool (the null block not counted),
     "held_blocks": [most non-null blocks one decoding request held, per group],
     "admitted_blocks": [non-null blocks a request held when its prompt was just scheduled, per group],
     "preemptions": requests preempted, "steps": schedule() calls, "finished": requests finished}

Each engine is vLLM's own (vllm_offline_engine.py: dummy weights, no tokenizer). Requests are added as
token ids (each prompt distinct, so the prefix cache shares nothing), then the real ``Scheduler`` and
KV-cache manager are stepped directly: ``schedule()``, and ``update_from_output`` with a made-up
``ModelRunnerOutput`` that samples one token for every request whose prompt is in. No forward pass is run
(this CPU build cannot run one for every model, and admission depends on the blocks alone). Loops are
bounded; engines are torn down between cases.
"""

from __future__ import annotations

import time
from typing import Any

# Sibling scripts: this file runs as a script in vLLM's venv, its folder first on sys.path.
from vllm_offline_engine import answer_cases, core_of

CASE_SECONDS = 120.0


def _live(manager: Any, request_id: str) -> int:
    return sum(1 for b in manager.req_to_blocks.get(request_id, []) if not b.is_null)


def drive(llm: Any, case: dict[str, Any]) -> dict[str, Any]:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.v1.outputs import ModelRunnerOutput

    engine = llm.llm_engine
    core = core_of(llm)
    sched = core.scheduler
    kvm = sched.kv_cache_manager
    managers = kvm.coordinator.single_type_managers
    pool = kvm.block_pool
    vc = core.vllm_config
    num_blocks = kvm.kv_cache_config.num_blocks
    answer: dict[str, Any] = {
        "num_blocks": num_blocks,
        "block_size": vc.cache_config.block_size,
        "max_num_batched_tokens": vc.scheduler_config.max_num_batched_tokens,
        "max_in_flight_tokens": getattr(vc, "max_in_flight_tokens", None),
        "groups": [
            {
                "manager": type(m).__name__,
                "block_size": m.block_size,
                "sliding_window": getattr(g.kv_cache_spec, "sliding_window", None),
            }
            for m, g in zip(managers, kvm.kv_cache_config.kv_cache_groups, strict=True)
        ],
    }
    prompt, vocab = case["prompt_tokens"], 500
    params = SamplingParams(max_tokens=case["max_tokens"], ignore_eos=True)
    for r in range(case["requests"]):
        # Distinct from the first token on: no block of one prompt is a prefix-cache hit for another.
        ids = [r + 2, *(((i * 7 + r * 13) % vocab) + 2 for i in range(1, prompt))]
        engine.add_request(f"r{r}", TokensPrompt(prompt_token_ids=ids), params)
    peak_running = peak_used = preemptions = steps = finished = 0
    held = [0] * len(managers)
    admitted: list[int] = []
    max_steps = case["requests"] * (case["max_tokens"] + prompt // 16 + 8)
    deadline = time.monotonic() + CASE_SECONDS
    while sched.has_requests():
        if steps >= max_steps or time.monotonic() > deadline:
            raise RuntimeError(f"no end after {steps} steps")
        out = sched.schedule()
        steps += 1
        preemptions += len(getattr(out, "preempted_req_ids", None) or ())
        scheduled = list(out.num_scheduled_tokens)
        sampled = []
        for rid in scheduled:
            req = sched.requests[rid]
            done = req.num_computed_tokens >= req.num_prompt_tokens
            sampled.append([7] if done else [])
            per_group = [_live(m, rid) for m in managers]
            if req.num_output_tokens == 0 and done and not admitted:
                admitted = per_group
            if req.num_output_tokens > 0:
                held = [max(h, n) for h, n in zip(held, per_group, strict=True)]
        peak_running = max(peak_running, len(sched.running))
        peak_used = max(peak_used, num_blocks - 1 - pool.get_num_free_blocks())
        result = ModelRunnerOutput(
            req_ids=scheduled,
            req_id_to_index={rid: i for i, rid in enumerate(scheduled)},
            sampled_token_ids=sampled,
        )
        outputs = sched.update_from_output(out, result)
        for eco in outputs.values():
            finished += sum(1 for o in eco.outputs if o.finish_reason is not None)
    answer.update(
        peak_running=peak_running,
        peak_used_blocks=peak_used,
        held_blocks=held,
        admitted_blocks=admitted,
        preemptions=preemptions,
        steps=steps,
        finished=finished,
    )
    return answer


if __name__ == "__main__":
    answer_cases(drive)
