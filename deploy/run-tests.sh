#!/usr/bin/env bash
# Every test suite, for `make test`, in three lanes where that is safe.
#
# The conformance suite starts one real vLLM engine after another. A start is about 27 s of one process at a
# time importing vLLM (measured: the same with a second core kept busy), so one pytest session leaves a core
# idle however its pool overlaps the next start; its modules are split over two sessions, so starts share the
# two cores: the foreground session, and a second lane running CONFORMANCE_B and then the modules that start
# no engine (PROBES: vLLM resolves configs and builds model classes in one process each, judging no time).
# The cluster suites mostly wait: tests/integration and tests/promtool on their own local control plane, then
# the simulator's end-to-end tests (tests/e2e/test_feedback_loop.py, test_dashboards_data.py) on another. The
# simulated engines keep their own virtual clock, so the latencies those tests judge come from the simulator's
# physics, not from how busy the machine is. The unit tests judge no time at all. These run in the side
# lane, one pytest session after the other (each cluster session starts and stops its own control plane).
# The side lane's CPU is mostly idle (its servers wait on each other), so it also runs three probe modules
# at its end (SIDE_PROBES), which evens the three lanes out.
# The background lanes' output is held back until the foreground session is done, so none interleave. Then
# the real-engine scenario runs with the machine to itself: it measures a real engine's latency, and a busy
# machine would be its noise.
#
# Exit status: the first failing suite's (pytest's 5, "no tests collected", is a failure like any other).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTEST=${PYTEST:-.venv/bin/pytest}
ARGS=(-q --durations=25)
SIM_E2E=(tests/e2e/test_feedback_loop.py tests/e2e/test_dashboards_data.py)
REAL_E2E=(tests/e2e/test_real_engine_loop.py)
# Conformance modules that start no vLLM server, only probe processes: the second conformance lane runs them
# after its engine modules. (test_remote_code.py, test_attention_backends.py and test_context_length.py probe
# too, but run in the first session: with them here the second lane ran about 2 minutes longer than the
# first, and the real-engine scenario waits for both.)
PROBES=(
  tests/conformance/test_kimi_linear.py
  tests/conformance/test_minimax_m3.py
  tests/conformance/test_parameter_counts.py
  tests/conformance/test_sparse_attention.py
)
# Probe modules the side lane runs after the unit tests (about a minute between them and the second lane's,
# with the second lane about two minutes longer without them). The newest model packages' suites run here
# too (one probe process for all of a session's model suites: 16 s for these seven on an idle machine, 59 s
# at a process each): the first session is the longest lane, and the real-engine scenario waits for it.
SIDE_PROBES=(
  tests/conformance/test_unknown_architectures.py
  tests/conformance/test_quantization_methods.py
  tests/conformance/test_sliding_layers.py
  tests/conformance/test_deepseek_v41.py
  tests/conformance/test_dots3_note.py
  tests/conformance/test_ling25.py
  tests/conformance/test_ling3.py
  tests/conformance/test_iquest_loop.py
  tests/conformance/test_olmo_hybrid.py
  tests/conformance/test_rnj1.py
  tests/conformance/test_zamba2.py
  tests/conformance/test_step1.py
  tests/conformance/test_plamo3.py
  tests/conformance/test_openpangu.py
  tests/conformance/test_step3.py
  tests/conformance/test_hrm_text.py
  tests/conformance/test_k2_horizon.py
  tests/conformance/test_muse_glimmer.py
  tests/conformance/test_nemotron_h_puzzle.py
)
# Conformance modules that start engines, run in a second session beside the first (about half of the
# suite's time alone). test_kv_capacity, test_metrics and test_sim_dialect share one server: keep them here
# together.
CONFORMANCE_B=(tests/conformance/test_{kv_capacity,layouts,lora_flags,metrics,shutdown,sim_dialect}.py)

lane_log=$(mktemp "${TMPDIR:-/tmp}/kvright-side-lane.XXXXXX")
lane_status=$(mktemp "${TMPDIR:-/tmp}/kvright-side-lane-status.XXXXXX")
b_log=$(mktemp "${TMPDIR:-/tmp}/kvright-conformance-b.XXXXXX")
b_status=$(mktemp "${TMPDIR:-/tmp}/kvright-conformance-b-status.XXXXXX")
a_log=$(mktemp "${TMPDIR:-/tmp}/kvright-conformance-a.XXXXXX")
real_log=$(mktemp "${TMPDIR:-/tmp}/kvright-real-engine.XXXXXX")
lane=""
b_lane=""
stop_lane() {
  if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
    kill -- "-$1" 2>/dev/null || kill "$1" 2>/dev/null
    wait "$1" 2>/dev/null
  fi
}
cleanup() {
  stop_lane "$lane"
  stop_lane "$b_lane"
  rm -f "$lane_log" "$lane_status" "$b_log" "$b_status" "$a_log" "$real_log"
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

# A module listed in a lane's list must exist (a rename would otherwise run it nowhere).
listed_elsewhere=("${PROBES[@]}" "${SIDE_PROBES[@]}" "${CONFORMANCE_B[@]}")
for module in "${listed_elsewhere[@]}"; do
  if [ ! -f "$module" ]; then
    echo "deploy/run-tests.sh: $module is listed in PROBES, SIDE_PROBES or CONFORMANCE_B but is not there" >&2
    exit 2
  fi
done
conformance_a=()  # every other conformance module, new ones included
for module in "${listed_elsewhere[@]}"; do conformance_a+=(--ignore "$module"); done

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
  echo "== ${SIDE_PROBES[*]}"
  "$PYTEST" "${ARGS[@]}" "${SIDE_PROBES[@]}"
  echo "$integration $sim $unit $?" >"$lane_status"
}

conformance_b_lane() {
  echo "== ${CONFORMANCE_B[*]}"
  "$PYTEST" "${ARGS[@]}" "${CONFORMANCE_B[@]}"
  local engines=$?
  echo "== ${PROBES[*]}"
  "$PYTEST" "${ARGS[@]}" "${PROBES[@]}"
  echo "$engines $?" >"$b_status"
}

started=$(date +%s)
set -m  # each lane gets a process group of its own, so cleanup can stop all of it
side_lane >"$lane_log" 2>&1 &
lane=$!
conformance_b_lane >"$b_log" 2>&1 &
b_lane=$!
set +m
echo "== tests/conformance but its probe modules and CONFORMANCE_B (two lanes run alongside; their output follows)"
"$PYTEST" "${ARGS[@]}" tests/conformance "${conformance_a[@]}" 2>&1 | tee "$a_log"
conformance=${PIPESTATUS[0]}
wait "$b_lane"
b_lane=""
read -r conformance_b probes <"$b_status" || { conformance_b=1; probes=1; }
echo "== the second conformance lane (ran alongside)"
cat "$b_log"
wait "$lane"
lane=""
read -r integration sim unit side_probes <"$lane_status" ||
  { integration=1; sim=1; unit=1; side_probes=1; }
echo "== the side lane (ran alongside the conformance suite)"
cat "$lane_log"
echo "== ${REAL_E2E[*]}"
"$PYTEST" "${ARGS[@]}" "${REAL_E2E[@]}" 2>&1 | tee "$real_log"
real=${PIPESTATUS[0]}

# What failed, once more at the very end: a CI record that keeps only the output's tail still names it.
failed=$(grep -h -E '^(FAILED|ERROR) ' "$a_log" "$b_log" "$lane_log" "$real_log")
if [ -n "$failed" ]; then
  echo "== failed or errored tests, from every lane"
  echo "$failed"
fi

echo "== suites: conformance exit $conformance and $conformance_b (its probe modules: exit $probes)," \
  "integration+promtool exit $integration, simulator e2e exit $sim, unit exit $unit," \
  "the side lane's probe modules exit $side_probes," \
  "real-engine e2e exit $real;" \
  "$(( ($(date +%s) - started) / 60 )) min $(( ($(date +%s) - started) % 60 )) s in all"
for status in "$conformance" "$conformance_b" "$probes" "$integration" "$sim" "$unit" "$side_probes" \
  "$real"; do
  if [ "$status" -ne 0 ]; then
    exit "$status"
  fi
done
