#!/usr/bin/env bash
# Every test suite, for `make test`, in two lanes where that is safe.
#
# The conformance suite is CPU-bound: one real vLLM engine after another. The cluster suite
# (tests/integration, tests/promtool) mostly waits on its own local control plane. They run side by side,
# each with its own pytest session (the cluster suite starts and stops its own control plane), and the
# cluster suite's output is held back until the conformance suite is done, so the two never interleave.
# Then the unit tests and the end-to-end suite run with the machine to themselves: the real-engine
# scenario measures latency, and a busy machine would be its noise.
#
# Exit status: the first failing suite's (pytest's 5, "no tests collected", is a failure like any other).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTEST=${PYTEST:-.venv/bin/pytest}
ARGS=(-q --durations=25)

lane_log=$(mktemp "${TMPDIR:-/tmp}/kvright-cluster-suite.XXXXXX")
lane=""
cleanup() {
  if [ -n "$lane" ] && kill -0 "$lane" 2>/dev/null; then
    kill "$lane" 2>/dev/null
    wait "$lane" 2>/dev/null
  fi
  rm -f "$lane_log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

started=$(date +%s)
"$PYTEST" "${ARGS[@]}" tests/integration tests/promtool >"$lane_log" 2>&1 &
lane=$!
echo "== tests/conformance (tests/integration and tests/promtool run alongside; their output follows)"
"$PYTEST" "${ARGS[@]}" tests/conformance
conformance=$?
wait "$lane"
cluster=$?
lane=""
echo "== tests/integration tests/promtool (ran alongside the conformance suite)"
cat "$lane_log"
echo "== tests/unit tests/e2e"
"$PYTEST" "${ARGS[@]}" tests/unit tests/e2e
rest=$?

echo "== suites: conformance exit $conformance, integration+promtool exit $cluster, unit+e2e exit $rest;" \
  "$(( ($(date +%s) - started) / 60 )) min $(( ($(date +%s) - started) % 60 )) s in all"
for status in "$conformance" "$cluster" "$rest"; do
  if [ "$status" -ne 0 ]; then
    exit "$status"
  fi
done
