#!/bin/sh
# Memory of fp4-mismatch grows with the steps by what it keeps per step (the
# metrics of each step), not by its report: --json, --csv and the tables are
# written as they are made, never held whole (issue: --json kept about 9.5 KB
# per step). The peak RSS of two runs, 5,000 and 40,000 one-token steps,
# gives the bytes per step; no timing is measured.
set -eu
. "$FP4S_SRCDIR/tests/mismatch/common.sh"

$PY - <<'PYEOF'
for n in (5000, 40000):
    with open("t%d.csv" % n, "w") as f:
        f.write("step,seq,trainer_logprob,rollout_logprob\n")
        for i in range(n):
            f.write("%d,0,-1,-1.%d\n" % (i, i % 7))
PYEOF
# peak RSS (KiB) of one command, from its own rusage
rss() {
    $PY -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
}
for mode in --json --csv --by-position; do
    a=$(rss fp4-mismatch --quiet $mode -o a.out t5000.csv)
    b=$(rss fp4-mismatch --quiet $mode -o b.out t40000.csv)
    per=$(( (b - a) * 1024 / 35000 ))
    echo "$mode: $a KiB for 5,000 steps, $b KiB for 40,000: $per bytes per step"
    # what is kept: the metrics of a step (fp4s_mm_metrics, 560 bytes; three with --by-position)
    lim=2500
    [ "$mode" = --by-position ] && lim=4000
    [ "$per" -le "$lim" ] || fail "$mode: $per bytes per step (at most $lim expected)"
done
# the report streamed to standard output is the same as the file
fp4-mismatch --quiet --json t5000.csv > s.json
fp4-mismatch --quiet --json -o f.json t5000.csv
cmp s.json f.json || fail "--json: stdout and -o differ"
echo ok
