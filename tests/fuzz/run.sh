#!/bin/bash
# Runs libFuzzer targets: run.sh OUTPUT SECONDS JOBS TARGET... (`make fuzz` calls it).
# Each target starts from its checked-in seeds (tests/fuzz/corpus/T, read only) and what
# earlier runs found (OUTPUT/fuzz/corpus/T, where new inputs go); JOBS targets at once.
# A crash leaves its input in OUTPUT/fuzz/crashes/ and fails the run; every crash fixed is
# kept in tests/fuzz/regress/T, which the test suite replays.
set -euo pipefail
out=$1 secs=$2 jobs=$3
shift 3
dir=$out/fuzz

mkdir -p "$dir/crashes" "$dir/log"
run_one() {
	local t=$1
	mkdir -p "$dir/corpus/$t"
	# -timeout: an input that takes this long is a hang, a finding like a crash
	"$dir/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 -timeout=20 -rss_limit_mb=4096 \
		-artifact_prefix="$dir/crashes/$t-" "$dir/corpus/$t" tests/fuzz/corpus/"$t" \
		tests/fuzz/regress/"$t" >"$dir/log/$t.log" 2>&1
}

pids=() names=()
for t in "$@"; do
	mkdir -p tests/fuzz/corpus/"$t" tests/fuzz/regress/"$t"
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
		wait -n || true
	done
	echo "  FUZZ     $t (${secs}s)"
	run_one "$t" &
	pids+=($!) names+=("$t")
done

failed=0
printf '%-10s %12s %10s %8s %8s  %s\n' target executions exec/s coverage corpus result
for i in "${!pids[@]}"; do
	t=${names[$i]} log=$dir/log/${names[$i]}.log result=ok
	status=0
	wait "${pids[$i]}" || status=$?
	[ "$status" -eq 0 ] || { result="FAILED (exit $status): see $log and $dir/crashes/"; failed=1; }
	# a target that died before its first report has no figures: "?", not an abort here
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 || true)
	speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1 || true)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
	corp=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
	printf '%-10s %12s %10s %8s %8s  %s\n' "$t" "${execs:-?}" "${speed:-?}" "${cov:-?}" "${corp:-?}" "$result"
	# the log's end in the run's own output: a CI run's build directory does not outlive it
	[ "$status" -eq 0 ] || tail -n 40 "$log" | sed "s/^/    $t| /"
done
exit $failed
