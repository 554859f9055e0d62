#!/bin/sh
# Every analysis tool under mpirun -n P (P = 1..4: FP4S_MPI_FULL=1) writes what one process
# writes: standard output (tables, --json, --csv) byte for byte, JSON files
# byte for byte, HDF5 reports with the same content bit for bit (h5dump with
# exact floats: HDF5 stamps object times, so two runs of one process already
# differ in those bytes).
. "$(dirname "$0")/common.sh"
fp4-capture synth -o c.h5 --tokens 200 --steps 9 > /dev/null
fp4-capture synth -o d.h5 --seed 2 --steps 7 --onset 3 > /dev/null
site=layers.0.mlp.experts.0.up_proj
act=c.h5:/steps/0/$site/rollout
printf 'step,seq,trainer_logprob,rollout_logprob\n' > t.csv
# fp4-rl's capture: per-step scalars next to the log-probs; a per-step scalar log
fp4-rl --width 32 --prompts 3 --group 4 --steps 5 --sft-max-steps 3 --eval-every 1 --eval-prompts 8 \
    -o rl.h5 > /dev/null 2>&1
printf 'step,reward,rollout_corr/k3_kl\n' > sc.csv
awk 'BEGIN { for (s = 0; s < 30; s++) printf "%d,%.4f,%.6g\n", s, s / 30, 1e-4 * exp(s / 9) }' >> sc.csv
awk 'BEGIN { for (s = 0; s < 12; s++) for (i = 0; i < 40; i++) printf "%d,%d,%.6f,%.6f\n", s, i % 5, -0.5 - i / 80, -0.5 - i / 80 - s * 0.001 }' >> t.csv

# case NAME OUTFILE TOOL ARGS...: OUTFILE (or -) is written by the tool
case_() {
    t0=$(date +%s)
    name=$1 out=$2
    shift 2
    o1=; o2=
    if [ "$out" != - ]; then o1="-o ref.$out"; o2="-o got.$out"; fi
    # shellcheck disable=SC2086
    "$@" $o1 > ref.stdout 2> ref.stderr || { fail "$name: one process failed: $(cat ref.stderr)"; return; }
    [ -s ref.stdout ] || [ "$out" != - ] || fail "$name: empty output"
    for p in $(ranks); do
        rm -f got.*
        # shellcheck disable=SC2086
        mpi "$p" "$@" $o2 > got.stdout 2> got.stderr || { fail "$name P=$p: $(cat got.stderr)"; continue; }
        cmp -s ref.stdout got.stdout || fail "$name P=$p: standard output differs"
        case "$out" in
            -) ;;
            *.h5) [ "$(h5text ref.$out)" = "$(h5text got.$out)" ] || fail "$name P=$p: $out differs" ;;
            *) cmp -s ref.$out got.$out || fail "$name P=$p: $out differs" ;;
        esac
    done
    rm -f ref.*
    echo "ok: $name ($(($(date +%s) - t0)) s)"
}

case_ "decompose capture by row nvfp4 csv" rep.h5 fp4-decompose -f nvfp4 --by row --csv --sites 'layers.1.*' c.h5 d.h5
PS=2 case_ "decompose split tensors by channel" - fp4-decompose -f nvfp4 --by channel --json "$act" c.h5:/weights/$site
PS=3 case_ "decompose by block mxfp4 table" - fp4-decompose --by block --steps 0 c.h5
case_ "channels nvfp4 weight" set.h5 fp4-channels -f nvfp4 --json "$act" --weight c.h5:/weights/$site
PS=4 case_ "channels mxfp4 json file" set.json fp4-channels --csv "$act" --weight c.h5:/weights/$site --top 9
case_ "mismatch captures and a csv trace" mm.json fp4-mismatch --json --by-position c.h5 t.csv d.h5
PS=3 case_ "mismatch table" - fp4-mismatch c.h5 d.h5 t.csv
case_ "mismatch per-step scalars of a capture, a scalar log" mmsc.json fp4-mismatch --json rl.h5 sc.csv c.h5
PS=2 case_ "mismatch --gate --baseline" - fp4-mismatch --gate --baseline d.h5 c.h5 rl.h5
case_ "compare" cmp.json fp4-compare --csv c.h5
PS=4 case_ "remedy" rem.h5 fp4-remedy --json -r none,rac:0.25,mbs:128 c.h5
PS=2 case_ "remedy plan" - fp4-remedy --plan 0.1 --json d.h5 --steps 0
PS=3 case_ "batch coupling" - fp4-batch -f nvfp4 -p te --seq-len 20 --trainer packed:40 --rollout decode:1,decode:4 --json c.h5

# --device cuda over ranks, where a GPU is usable (the GPU machine): each rank's
# rows on the GPU give one CPU process's bytes (test_cuda_rows checks the same
# in the kernels' host emulation; failures.sh the refusal without a GPU)
if fp4-decompose --device cuda "$act" > /dev/null 2>&1; then
    for args in "-f nvfp4 --by channel --json" "--by row --csv"; do
        # shellcheck disable=SC2086
        fp4-decompose $args "$act" c.h5:/weights/$site > ref.cpu
        for p in $(PS=2 ranks); do
            # shellcheck disable=SC2086
            mpi "$p" fp4-decompose --device cuda $args "$act" c.h5:/weights/$site > got.gpu 2> got.err ||
                { fail "--device cuda P=$p: $(cat got.err)"; continue; }
            cmp -s ref.cpu got.gpu || fail "--device cuda $args P=$p: differs from one process on the CPU"
        done
        echo "ok: --device cuda $args over ranks"
    done
else
    echo "skip: --device cuda over ranks (no usable GPU here)"
fi

# each rank read only its share: one tensor cut into three row ranges
FP4S_MPI_VERBOSE=1 mpi 3 fp4-decompose "$act" > /dev/null 2> v.err || fail "verbose run"
[ "$(grep -c 'rows \[.*(a part)' v.err)" = 3 ] || fail "the tensor is not cut into 3 parts: $(cat v.err)"
FP4S_MPI_VERBOSE=1 mpi 3 fp4-mismatch c.h5 > /dev/null 2> v.err || fail "verbose mismatch"
[ "$(grep -c 'steps 3 of its range' v.err)" = 3 ] || fail "the 9 steps are not cut into 3 ranges: $(cat v.err)"
[ "$fails" = 0 ] || exit 1
echo "all identical"
