#!/bin/sh
# fp4-rl's command line: bad usage and its messages, existing outputs, the
# capture it writes as the other tools read it.
set -eu
. "$FP4S_SRCDIR/tests/rl/common.sh"
tiny="--width 32 --prompts 3 --group 4 --steps 2 --sft-max-steps 3 --eval-every 1 --eval-prompts 8"

expect_exit 2 fp4-rl --width 32
expect_err "no output"
expect_exit 2 fp4-rl --trainer wfq -o x.h5
expect_err "needs a rollout of fp8, mxfp4 or nvfp4"
expect_exit 2 fp4-rl --rollout nvfp4 -p ocp -o x.h5
expect_err "ocp"
expect_exit 2 fp4-rl --rollout nvfp4 --remedy rac:2 -o x.h5
expect_err "rac"
expect_exit 2 fp4-rl --rollout nvfp4 --remedy wfq -o x.h5
expect_err "not a rollout remedy"
expect_exit 2 fp4-rl --rollout nvfp4 --remedy mbs:32:max $tiny -o x.h5   # max needs power-of-two scales
expect_err "mbs"
expect_exit 2 fp4-rl --width 48 -o x.h5
expect_err "multiples of 32"
expect_exit 2 fp4-rl --quant-sites qkv,mlp -o x.h5
expect_err "unknown site class 'mlp'"
expect_exit 2 fp4-rl --steps 0 -o x.h5
expect_exit 2 fp4-rl --lr abc -o x.h5
expect_exit 2 fp4-rl --demo --rollout nvfp4
expect_err "--demo runs its own numerics"
expect_exit 2 fp4-rl --demo --demo-runs bf16,fp64
expect_err "unknown run 'fp64'"
[ ! -e x.h5 ] || fail "a refused run left x.h5"

# an output that cannot be written fails at once, with its name
expect_exit 4 fp4-rl $tiny -o no/such/dir/x.h5
expect_err "no/such/dir/x.h5"

# a run, then the same output again: refused without --force, the capture kept
fp4-rl $tiny --rollout nvfp4 --stats s.tsv -o run.h5 2>err.txt
sum=$(cksum < run.h5)
expect_exit 4 fp4-rl $tiny -o run.h5
expect_err "exists"
[ "$(cksum < run.h5)" = "$sum" ] || fail "the refused run changed run.h5"
fp4-rl $tiny --force -o run.h5
# the capture as fp4-mismatch and fp4-capture read it
fp4-capture ls run.h5 | grep -q "producer fp4-rl" || fail "producer"
fp4-mismatch --csv run.h5 > mm.csv
[ "$(grep -c '^run,all,' mm.csv)" -eq 2 ] || { cat mm.csv; fail "fp4-mismatch: expected 2 steps"; }
# fp4-plot and fp4-compare read it too (step 0 holds activations: --act-every 50)
if command -v gnuplot >/dev/null 2>&1; then
    fp4-plot mismatch --term dumb -o - run.h5 > plot.txt
    grep -q "mean_abs" plot.txt || fail "fp4-plot: no mismatch plot"
fi
fp4-compare -f nvfp4 --top 3 run.h5 > cmp.txt
grep -q "layers.0.self_attn.qkv_proj" cmp.txt || { cat cmp.txt; fail "fp4-compare: no qkv_proj site"; }
# --json: the per-step scalars
fp4-rl $tiny --json --force -o run.h5 > j.json
grep -q '"per_step"' j.json && grep -q '"acc_trainer"' j.json || fail "--json fields"
# SIGINT: stops after the step under way; the capture and the stats keep the steps done
set +e
fp4-rl $tiny --steps 1000000 --sft-max-steps 0 --stats int.tsv -o int.h5 2>err.txt &
pid=$!
sleep 4
kill -INT $pid
wait $pid
got=$?
set -e
[ "$got" = 130 ] || { cat err.txt >&2; fail "SIGINT: exit $got, expected 130"; }
expect_err "interrupted by signal 2 after"
n=$(($(wc -l < int.tsv) - 1))
[ "$n" -ge 1 ] || fail "SIGINT: no step in int.tsv"
fp4-mismatch --csv int.h5 > int.csv
[ "$(grep -c '^int,all,' int.csv)" -eq "$n" ] || fail "SIGINT: the capture and the stats disagree ($n steps)"
echo ok
