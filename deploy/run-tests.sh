#!/usr/bin/env bash
# Every test suite, for `make test`, in two lanes where that is safe.
#
# The conformance suite is CPU-bound: one real vLLM engine after another. The cluster suites mostly wait:
# tests/integration and tests/promtool on their own local control plane, then the simulator's end-to-end
# tests (tests/e2e/test_feedback_loop.py, test_dashboards_data.py) on another. The simulated engines keep
# their own virtual clock, so the latencies those tests judge come from the simulator's physics, not from
# how busy the machine is. The unit tests judge no time at all. These three run beside the conformance
# suite, one pytest session after the other (each cluster session starts and stops its own control plane),
# and their output is held back until the conformance suite is done, so the two never interleave. The
# conformance suite is the longer, so the side lane also takes its modules that start no engine (PROBES:
# vLLM resolves configs and builds model classes in one process each, judging no time; about 4 minutes
# and 452 of its tests), and the lanes end closer together. Then the real-engine scenario runs with the
# machine to itself: it measures a real engine's latency, and a busy machine would be its noise.
#
# Exit status: the first failing suite's (pytest's 5, "no tests collected", is a failure like any other).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTEST=${PYTEST:-.venv/bin/pytest}
ARGS=(-q --durations=25)
SIM_E2E=(tests/e2e/test_feedback_loop.py tests/e2e/test_dashboards_data.py)
REAL_E2E=(tests/e2e/test_real_engine_loop.py)
# Conformance modules that start no vLLM server, only probe processes: the side lane runs them.
PROBES=(
  tests/conformance/test_unknown_architectures.py
  tests/conformance/test_attention_backends.py
  tests/conformance/test_context_length.py
  tests/conformance/test_parameter_counts.py
  tests/conformance/test_quantization_methods.py
  tests/conformance/test_remote_code.py
  tests/conformance/test_sliding_layers.py
)

lane_log=$(mktemp "${TMPDIR:-/tmp}/kvright-side-lane.XXXXXX")
lane_status=$(mktemp "${TMPDIR:-/tmp}/kvright-side-lane-status.XXXXXX")
lane=""
cleanup() {
  if [ -n "$lane" ] && kill -0 "$lane" 2>/dev/null; then
    kill -- "-$lane" 2>/dev/null || kill "$lane" 2>/dev/null
    wait "$lane" 2>/dev/null
  fi
  rm -f "$lane_log" "$lane_status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Every e2e module is run by one lane or the other: a new one must be added to a list above.
listed=$(printf '%s\n' "${SIM_E2E[@]}" "${REAL_E2E[@]}" | sort)
present=$(ls tests/e2e/test_*.py | sort)
if [ "$listed" != "$present" ]; then
  echo "deploy/run-tests.sh: tests/e2e modules and the lanes' lists differ:" >&2
  diff <(echo "$listed") <(echo "$present") >&2
  exit 2
fi

# A module listed in PROBES must exist (a rename would otherwise run it nowhere).
for module in "${PROBES[@]}"; do
  if [ ! -f "$module" ]; then
    echo "deploy/run-tests.sh: $module is listed in PROBES but does not exist" >&2
    exit 2
  fi
done
not_probes=()
for module in "${PROBES[@]}"; do not_probes+=(--ignore "$module"); done

side_lane() {
  echo "== tests/integration tests/promtool"
  "$PYTEST" "${ARGS[@]}" tests/integration tests/promtool
  local integration=$?
  echo "== ${SIM_E2E[*]}"
  "$PYTEST" "${ARGS[@]}" "${SIM_E2E[@]}"
  local sim=$?
  echo "== tests/unit"
  "$PYTEST" "${ARGS[@]}" tests/unit
  local unit=$?
  echo "== ${PROBES[*]}"
  "$PYTEST" "${ARGS[@]}" "${PROBES[@]}"
  local probes=$?
  echo "$integration $sim $unit $probes" >"$lane_status"
}

started=$(date +%s)
set -m  # the lane gets a process group of its own, so cleanup can stop all of it
side_lane >"$lane_log" 2>&1 &
lane=$!
set +m
echo "== tests/conformance but its probe modules (the side lane runs alongside; its output follows)"
"$PYTEST" "${ARGS[@]}" tests/conformance "${not_probes[@]}"
conformance=$?
wait "$lane"
lane=""
read -r integration sim unit probes <"$lane_status" || { integration=1; sim=1; unit=1; probes=1; }
echo "== the side lane (ran alongside the conformance suite)"
cat "$lane_log"
echo "== ${REAL_E2E[*]}"
"$PYTEST" "${ARGS[@]}" "${REAL_E2E[@]}"
real=$?

echo "== suites: conformance exit $conformance (its probe modules: exit $probes)," \
  "integration+promtool exit $integration, simulator e2e exit $sim, unit exit $unit," \
  "real-engine e2e exit $real;" \
  "$(( ($(date +%s) - started) / 60 )) min $(( ($(date +%s) - started) % 60 )) s in all"
for status in "$conformance" "$probes" "$integration" "$sim" "$unit" "$real"; do
  if [ "$status" -ne 0 ]; then
    exit "$status"
  fi
done
