#!/usr/bin/env bash
# Runs make test's stages, each a Makefile target, SLOTS at a time (default 2):
#   tools/test_stages.sh STAGE[:NEEDS] ...
# A stage starts when a slot is free and the stage it needs (if any) has passed; among the stages
# ready to start, the first one listed goes first, so list the long chains' first stages early.
# The stages share the machine's cores: while one runs a single-threaded step (pytest, a link, a
# configure step, the fuzzer) another's compilers or tests take the idle core, and the whole run
# takes about its total CPU time over the cores.
# Each stage logs to build/test-logs/<stage>.log. When it ends, one line says how it ended and in
# how many seconds, followed by its closing lines (the test runners' summaries), or by the end of
# its log if it failed. A stage whose needed stage failed is not run; the others go on. At the
# end, a table of every stage's time, and the exit status: 0 only if every stage passed.
set -uo pipefail
cd "$(dirname "$0")/.."

SLOTS=${SLOTS:-2}
LOG_DIR=build/test-logs
mkdir -p "$LOG_DIR"
rm -f "$LOG_DIR"/*.log "$LOG_DIR"/stages.tsv
LOCK="$LOG_DIR/.print-lock"
: > "$LOCK"

# What a stage's log shows of its result: the runners' closing lines (pytest, ctest, GoogleTest
# per program, libFuzzer's stats).
SUMMARY='^[0-9]+ (passed|failed)|tests passed|Total Test time|^test_[a-z_]+: |convcore fuzz:|stat::number_of_executed_units|^\[  PASSED  \]|^\[  FAILED  \]'

say() {  # prints its standard input as one block, not interleaved with the other stages'
    flock "$LOCK" cat
}

record() {  # stage, status, seconds
    flock "$LOCK" printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$LOG_DIR/stages.tsv"
}

run_stage() {  # stage; exit status 0 if it passed
    local stage=$1 start end status
    local log="$LOG_DIR/$stage.log"
    start=$(date +%s)
    if make --no-print-directory "$stage" > "$log" 2>&1; then status=passed; else status=FAILED; fi
    end=$(date +%s)
    record "$stage" "$status" "$((end - start))"
    {
        echo "== $stage: $status in $((end - start)) s ($(date +%T); log: $log)"
        if [ "$status" = passed ]; then
            grep -E "$SUMMARY" "$log" | tail -n 12 | sed 's/^/   /'
        else
            tail -n 150 "$log" | sed 's/^/   /'
        fi
    } | say
    [ "$status" = passed ]
}

declare -A needs state started_by
order=()
for spec in "$@"; do
    name=${spec%%:*}
    order+=("$name")
    needs[$name]=$([[ $spec == *:* ]] && echo "${spec#*:}")
    state[$name]=waiting
done

t0=$(date +%s)
running=0
while :; do
    for name in "${order[@]}"; do
        [ "${state[$name]}" = waiting ] || continue
        need=${needs[$name]}
        if [ -n "$need" ]; then
            case ${state[$need]:-missing} in
                passed) ;;
                FAILED | "not run" | missing)
                    state[$name]="not run"
                    record "$name" "not run" 0
                    echo "== $name: not run ($need ${state[$need]:-is not a stage})" | say
                    continue ;;
                *) continue ;;
            esac
        fi
        [ "$running" -lt "$SLOTS" ] || continue
        run_stage "$name" &
        started_by[$!]=$name
        state[$name]=running
        running=$((running + 1))
    done
    [ "$running" -gt 0 ] || break
    wait -n -p done_pid
    rc=$?
    name=${started_by[$done_pid]}
    if [ "$rc" = 0 ]; then state[$name]=passed; else state[$name]=FAILED; fi
    running=$((running - 1))
done
t1=$(date +%s)

echo
echo "== make test: the stages (seconds; $SLOTS at a time on $(nproc) cores)"
awk -F'\t' '{ printf "   %-16s %-8s %5d\n", $1, $2, $3 }' "$LOG_DIR/stages.tsv"
echo "   total wall time: $((t1 - t0)) s"
passed=$(awk -F'\t' '$2 == "passed"' "$LOG_DIR/stages.tsv" | wc -l)
echo "stages: $passed passed, $(($(wc -l < "$LOG_DIR/stages.tsv") - passed)) failed"
[ "$passed" = "${#order[@]}" ]
