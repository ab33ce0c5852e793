"""Ask real vLLM how one API server over data-parallel engines reports its scheduler gauges.

Runs in the vLLM venv's python: ``vllm_dp_metrics_probe.py MODEL_DIR`` reads ``{"running": [int],
"waiting": [int]}`` (one entry per engine) from stdin, builds the engine config for MODEL_DIR as
``vllm serve`` would (no engine started), and has vLLM's own ``PrometheusStatLogger`` record each engine's
``SchedulerStats`` under the engine indexes a data-parallel API server manages (``range(dp)``, its
``engine_ranks_managed``). Writes ``{"exposition": str}`` as stdout's last line: vLLM's Prometheus
exposition text of the scheduler gauges.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    from prometheus_client import REGISTRY, generate_latest
    from vllm.engine.arg_utils import EngineArgs
    from vllm.v1.metrics.loggers import PrometheusStatLogger
    from vllm.v1.metrics.stats import SchedulerStats

    wanted = json.loads(sys.stdin.read())
    running, waiting = wanted["running"], wanted["waiting"]
    args = EngineArgs(model=sys.argv[1], max_model_len=256, served_model_name=["tiny"])
    config = args.create_engine_config()
    logger = PrometheusStatLogger(config, engine_indexes=list(range(len(running))))
    for engine, (r, w) in enumerate(zip(running, waiting, strict=True)):
        stats = SchedulerStats(num_running_reqs=r, num_waiting_reqs=w)
        logger.record(scheduler_stats=stats, iteration_stats=None, engine_idx=engine)
    text = generate_latest(REGISTRY).decode()
    scheduler = [line for line in text.splitlines() if line.startswith("vllm:num_requests_")]
    print(json.dumps({"exposition": "\n".join(scheduler) + "\n"}))  # the last line (vLLM logs to stdout)


if __name__ == "__main__":
    main()
