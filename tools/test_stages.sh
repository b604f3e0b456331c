#!/usr/bin/env bash
# Runs make test's stages: each argument is a lane, a space-separated list of Makefile targets run
# one after the other; the lanes run side by side. Each stage logs to build/test-logs/<stage>.log.
# When a stage ends, one line says how it ended and in how many seconds, followed by its closing
# lines (the test runners' summaries), or by the end of its log if it failed. A failed stage stops
# its lane (the stages after it use what it builds); the other lanes go on. At the end, a table of
# every stage's time, and the exit status: 0 only if every stage passed.
set -uo pipefail
cd "$(dirname "$0")/.."

LOG_DIR=build/test-logs
mkdir -p "$LOG_DIR"
rm -f "$LOG_DIR"/*.log "$LOG_DIR"/stages.tsv
LOCK="$LOG_DIR/.print-lock"
: > "$LOCK"

# What a stage's log shows of its result: the runners' closing lines (pytest, ctest, GoogleTest
# per program, libFuzzer's stats).
SUMMARY='^[0-9]+ (passed|failed)|tests passed|Total Test time|^test_[a-z_]+: |convcore fuzz:|stat::number_of_executed_units|^\[  PASSED  \]|^\[  FAILED  \]'

say() {  # prints its standard input as one block, not interleaved with the other lanes'
    flock "$LOCK" cat
}

run_stage() {  # lane, stage
    local lane=$1 stage=$2 start end status
    local log="$LOG_DIR/$stage.log"
    start=$(date +%s)
    if make --no-print-directory "$stage" > "$log" 2>&1; then status=passed; else status=FAILED; fi
    end=$(date +%s)
    printf '%s\t%s\t%s\t%s\n' "$lane" "$stage" "$status" "$((end - start))" >> "$LOG_DIR/stages.tsv"
    {
        echo "== [lane $lane] $stage: $status in $((end - start)) s ($(date +%T); log: $log)"
        if [ "$status" = passed ]; then
            grep -E "$SUMMARY" "$log" | tail -n 12 | sed 's/^/   /'
        else
            tail -n 150 "$log" | sed 's/^/   /'
        fi
    } | say
    [ "$status" = passed ]
}

run_lane() {  # lane number, stages...
    local lane=$1
    shift
    local stage
    while [ $# -gt 0 ]; do
        stage=$1
        shift
        if ! run_stage "$lane" "$stage"; then
            for stage in "$@"; do
                printf '%s\t%s\t%s\t%s\n' "$lane" "$stage" "not run" 0 >> "$LOG_DIR/stages.tsv"
            done
            return 1
        fi
    done
}

t0=$(date +%s)
lane=0
pids=()
for stages in "$@"; do
    lane=$((lane + 1))
    # shellcheck disable=SC2086  # a lane is a word list
    run_lane "$lane" $stages &
    pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
t1=$(date +%s)

echo
echo "== make test: the stages (seconds; the lanes ran side by side, $(nproc) cores)"
sort -k1,1n -s "$LOG_DIR/stages.tsv" | awk -F'\t' '{ printf "   lane %s  %-16s %-8s %5d\n", $1, $2, $3, $4 }'
echo "   total wall time: $((t1 - t0)) s"
passed=$(awk -F'\t' '$3 == "passed"' "$LOG_DIR/stages.tsv" | wc -l)
echo "stages: $passed passed, $(($(wc -l < "$LOG_DIR/stages.tsv") - passed)) failed"
exit $failed
