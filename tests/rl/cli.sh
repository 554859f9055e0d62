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

# --stats that cannot be written fails before the training, and leaves no capture
start=$(date +%s)
expect_exit 4 fp4-rl $tiny --steps 1000 -o st.h5 --stats no/such/dir/s.tsv
expect_err "no/such/dir/s.tsv"
[ $(($(date +%s) - start)) -lt 20 ] || fail "--stats was checked only after the training"
ls st.h5* > /dev/null 2>&1 && fail "a refused --stats left a capture"

# a run, then the same output again: refused without --force (exit 2, as every
# tool's existing HDF5 output), the capture kept
fp4-rl $tiny --rollout nvfp4 --stats s.tsv -o run.h5 2>err.txt
sum=$(cksum < run.h5)
expect_exit 2 fp4-rl $tiny -o run.h5
expect_err "exists"
[ "$(cksum < run.h5)" = "$sum" ] || fail "the refused run changed run.h5"
# a full disk (here a file size limit): exit 4, nothing written, and with
# --force the old capture and stats are still there, unchanged
ssum=$(cksum < s.tsv)
expect_exit 4 sh -c "trap '' XFSZ; ulimit -f 64; exec fp4-rl $tiny --steps 20 --act-every 1 --force --stats s.tsv -o run.h5"
[ "$(cksum < run.h5)" = "$sum" ] || fail "a failed --force run destroyed the old capture"
[ "$(cksum < s.tsv)" = "$ssum" ] || fail "a failed --force run changed the old stats"
expect_exit 4 sh -c "trap '' XFSZ; ulimit -f 64; exec fp4-rl $tiny --steps 20 --act-every 1 --stats full.tsv -o full.h5"
ls full.* > /dev/null 2>&1 && fail "a run that could not write its capture left $(ls full.*)"
fp4-rl $tiny --force -o run.h5
[ "$(cksum < run.h5)" != "$sum" ] || fail "--force did not replace run.h5"
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
# SIGHUP (a closed terminal) too: exit 129, both outputs hold the steps done,
# the capture closed (not "interrupted")
set +e
fp4-rl $tiny --steps 1000000 --sft-max-steps 0 --stats hup.tsv -o hup.h5 2>err.txt &
pid=$!
sleep 4
kill -HUP $pid
wait $pid
got=$?
set -e
[ "$got" = 129 ] || { cat err.txt >&2; fail "SIGHUP: exit $got, expected 129"; }
expect_err "interrupted by signal 1 after"
[ -f hup.tsv ] || fail "SIGHUP: no stats"
n=$(($(wc -l < hup.tsv) - 1))
fp4-mismatch --csv hup.h5 > hup.csv
[ "$(grep -c '^hup,all,' hup.csv)" -eq "$n" ] || fail "SIGHUP: the capture and the stats disagree ($n steps)"
fp4-capture ls hup.h5 > ls.txt
grep -q interrupted ls.txt && fail "SIGHUP: the capture was left open"
# --demo: its outputs all or none (a run that cannot write: no directory left;
# an existing directory keeps what it held and gets nothing)
small="$tiny --act-every 1 --steps 20"
expect_exit 4 sh -c "trap '' XFSZ; ulimit -f 64; exec fp4-rl --demo --demo-runs bf16,nvfp4 $small -o dd"
[ ! -e dd ] || fail "a failed demo left $(ls dd)"
mkdir dk
echo keep > dk/mine.txt
expect_exit 4 sh -c "trap '' XFSZ; ulimit -f 64; exec fp4-rl --demo --demo-runs bf16 $small -o dk"
[ "$(ls dk)" = mine.txt ] || fail "a failed demo left $(ls dk) in an existing directory"
echo ok
