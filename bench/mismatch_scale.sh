#!/bin/sh
# fp4-mismatch over long logs (issue 24 item 3): time and peak memory of N
# one-token steps (a token trace) and of an N-row W&B history export, in
# each output mode. Prints one line per run: input, mode, wall, user and sys
# seconds and the peak RSS from /usr/bin/time -v, and the output's size.
#
#   bench/mismatch_scale.sh [BUILD_DIR] [N]       (default: build, 1000000)
#
# The inputs are made with awk (a fixed LCG: the same bytes every time):
#   steps.csv  step,seq,trainer_logprob,rollout_logprob, one token a step
#   wandb.csv  _step,_runtime,_timestamp and 8 metrics (verl's names), one row a step
# Needs /usr/bin/time (Debian: time). Outputs go to a temporary directory
# (the --json of 10^6 steps is about 1.6 GB).
set -eu
B=${1:-build}
N=${2:-1000000}
case "$B" in /*) ;; *) B="$(pwd)/$B" ;; esac
M="$B/tools/fp4-mismatch"
[ -x "$M" ] || { echo "mismatch_scale: $M: not built (ninja -C $B)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "mismatch_scale: needs /usr/bin/time" >&2; exit 2; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT INT TERM
awk -v n="$N" 'BEGIN { print "step,seq,trainer_logprob,rollout_logprob"; s = 12345
    for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; a = -(s % 1000) / 997
        s = (s * 1103515245 + 12345) % 2147483648; b = a - (s % 100) / 10007
        printf "%d,%d,%.6f,%.6f\n", i, i % 7, a, b } }' > "$W/steps.csv"
awk -v n="$N" 'BEGIN { print "_step,_runtime,_timestamp,rollout_corr/k3_kl,rollout_corr/kl,rollout_corr/chi2_token," \
    "training/rollout_probs_diff_mean,actor/grad_norm,critic/score/mean,response_length/mean,actor/entropy"; s = 7
    for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; x = (s % 100000) / 1e7
        printf "%d,%.3f,%.3f,%.6g,%.6g,%.6g,%.6g,%.5g,%.5g,%.4g,%.5g\n", i, i * 1.5, 1.7e9 + i, x, x / 2, x * 3,
               x / 5, 1 + x, 0.5 + x, 300 + i % 50, 2 - x } }' > "$W/wandb.csv"
echo "N = $N; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
for in in steps.csv wandb.csv; do
    for mode in table --json --csv; do
        opt=$mode
        [ "$mode" = table ] && opt=
        /usr/bin/time -v "$M" --quiet $opt -o "$W/out" "$W/$in" 2> "$W/time.txt" || { cat "$W/time.txt" >&2; exit 1; }
        wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$W/time.txt")
        usr=$(sed -n 's/.*User time (seconds): //p' "$W/time.txt")
        sys=$(sed -n 's/.*System time (seconds): //p' "$W/time.txt")
        rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$W/time.txt")
        size=$(stat -c %s "$W/out")
        printf '%-10s %-6s wall %8s  user %7s s  sys %6s s  peak RSS %7d MiB  output %6d MiB\n' "$in" "$mode" \
            "$wall" "$usr" "$sys" $((rss / 1024)) $((size / 1048576))
        rm -f "$W/out"
    done
done
