"""``python -m bench``: run the planner benchmark and print the machine, timings and ratios.

``python -m bench --operator [--count N --rate R --soak-seconds S ...]``: the operator at scale, a burst and a
paced run against the raw API floor, then a soak (bench/operator_scale.py, bench/operator_soak.py).
``python -m bench control-loop [--seeds N --json ...]``: the control-loop benchmark (bench/control_loop.py).
"""

import sys

if sys.argv[1:2] == ["--operator"]:  # the operator at scale against the local control plane (minutes)
    from bench.operator_scale import report as operator_report

    raise SystemExit(operator_report(sys.argv[2:]))

if sys.argv[1:2] == ["control-loop"]:  # kvright's control law against autoscalers, on the simulator
    from bench.control_loop import main as control_loop_main

    raise SystemExit(control_loop_main(sys.argv[2:]))

from bench.planner import report

raise SystemExit(report())
