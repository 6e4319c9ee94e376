#!/usr/bin/env bash
# tests/run_suites.sh [-j JOBS] [-l LOGDIR] SUITE...
#
# Runs check suites (test binaries), JOBS at a time (default 1), in the
# order given (so the slowest should come first). Each suite's output goes
# to LOGDIR/<name>.log (default build/test-logs), check's XML report, with
# each test's seconds, to LOGDIR/<name>.xml; when it ends, one block
# is printed, whole, never mixed with another's: a line with its name and
# seconds, then check's summary line ("100%: Checks: N, Failures: 0,
# Errors: 0") on success, or its whole log on failure. A last line counts
# the suites: "suites: N passed, N failed"; the exit status is 1 if any
# failed.
#
# The suites inherit the environment; SUITE_ENV_<name>, if set, adds
# VAR=value words to one suite's (SUITE_ENV_test_http='CK_RUN_CASE=shared').
# The HTTP suites' servers bind port 0 and their files are made with
# mkstemp/mkdtemp, so suites can run side by side.
set -uo pipefail

jobs=1
logdir=build/test-logs
while getopts j:l: opt; do
    case $opt in
    j) jobs=$OPTARG ;;
    l) logdir=$OPTARG ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "run_suites.sh: no suite given" >&2; exit 2; }
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1

rm -rf "$logdir"
mkdir -p "$logdir"
lock=$logdir/.print-lock
: >"$lock"

# One suite: run it, then print its block under the lock.
run_one() {
    local bin=$1 name=${1##*/} start=$SECONDS rc extra_var
    local log=$logdir/$name.log
    extra_var=SUITE_ENV_$name
    # shellcheck disable=SC2086 # VAR=value words, split on purpose
    env CK_XML_LOG_FILE_NAME="$logdir/$name.xml" ${!extra_var:-} "$bin" >"$log" 2>&1 </dev/null
    rc=$?
    local secs=$((SECONDS - start)) out
    if [ $rc -eq 0 ]; then
        out="== $name: passed in $secs s"$'\n'"$(grep -E '^[0-9]+%: Checks: ' "$log" || echo "(no check summary line)")"
        echo "$name" >"$logdir/$name.passed"
    else
        out="== $name: FAILED (exit status $rc) after $secs s; its output ($log):"$'\n'"$(cat "$log")"$'\n'"== end of $name"
        echo "$name" >"$logdir/$name.failed"
    fi
    {
        flock 9
        printf '%s\n' "$out"
    } 9>>"$lock"
}

running=0
for bin in "$@"; do
    if [ ! -x "$bin" ]; then
        echo "== ${bin##*/}: FAILED: $bin is not an executable" >&2
        echo "${bin##*/}" >"$logdir/${bin##*/}.failed"
        continue
    fi
    while [ "$running" -ge "$jobs" ]; do
        wait -n
        running=$((running - 1))
    done
    run_one "$bin" &
    running=$((running + 1))
done
wait

passed=$(find "$logdir" -name '*.passed' | wc -l)
failed=$(find "$logdir" -name '*.failed' | wc -l)
if [ "$failed" -gt 0 ]; then
    echo "== failed: $(cat "$logdir"/*.failed | sort | tr '\n' ' ')(logs in $logdir/)"
fi
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
