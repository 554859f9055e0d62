#!/bin/sh
# fp4-rl's runs are the same bits on any x86-64 machine and thread count
# (fp4-rl(1), DETERMINISM): two short runs (a naive NVFP4 rollout; QUADS, whose
# rollout GEMMs are the remedy's) give the committed digest, on 1 and 2
# threads, on the reference kernels (FP4S_FORCE_REF=1: SSE2 instead of this
# CPU's AVX2 or AVX-512), and with OpenBLAS told it runs on other cores
# (OPENBLAS_CORETYPE: the kernels another CPU would get; with the BLAS doing
# the GEMMs the trajectories differed between an Intel and an AMD host).
# The digest is sha256 over every step's scalars (the --stats table without
# its times) and every step's log-prob metrics (fp4-mismatch --csv: 17
# digits of sums over every token, so one flipped bit of a log-prob shows).
#
# A change that moves the trajectories on purpose (the model, its defaults,
# the sampler) changes DIGEST: say so in the commit, and give the new value
# printed by `FP4S_SRCDIR=. sh tests/rl/digest.sh --print`.
. "$FP4S_SRCDIR/tests/rl/common.sh"
count_failures
DIGEST=a721b02e6a9edf977cd27a4b5ce10a3d4bf8c6d19847a045d81181b9e1250176

tiny="--width 32 --prompts 4 --group 4 --steps 3 --sft-max-steps 10 --eval-every 2 --eval-prompts 16 --act-every 0"
digest() { # label, environment assignments...: the digest of the two runs
    label=$1
    shift
    rm -f a.h5 b.h5 a.tsv b.tsv
    env "$@" fp4-rl $tiny --rollout nvfp4 --stats a.tsv -o a.h5 2> err.txt ||
        { cat err.txt >&2; fail "$label: the nvfp4 run failed"; return; }
    env "$@" fp4-rl $tiny --rollout nvfp4 --trainer wfq --remedy rac:0.25 --seed 2 --stats b.tsv -o b.h5 \
        2> err.txt || { cat err.txt >&2; fail "$label: the quads run failed"; return; }
    for r in a b; do
        awk -F'\t' 'NR == 1 { for (i = 1; i <= NF; i++) keep[i] = $i !~ /^t_/ }
                    { s = ""; for (i = 1; i <= NF; i++) if (keep[i]) s = s $i "\t"; print s }' $r.tsv
        fp4-mismatch --csv $r.h5
    done > all.txt
    sha256sum < all.txt | cut -d' ' -f1
}

d1=$(digest "1 thread" FP4S_THREADS=1)
if [ "${1:-}" = --print ]; then
    echo "$d1"
    exit 0
fi
[ "$d1" = "$DIGEST" ] || fail "the runs' digest is $d1, committed $DIGEST (fp4-rl(1), DETERMINISM)"
for v in "2 threads:FP4S_THREADS=2" "the reference kernels:FP4S_FORCE_REF=1" \
         "OpenBLAS on Sandybridge cores:OPENBLAS_CORETYPE=Sandybridge" \
         "OpenBLAS on Nehalem cores, 2 threads:OPENBLAS_CORETYPE=Nehalem FP4S_THREADS=2"; do
    label=${v%%:*}
    # shellcheck disable=SC2086
    d=$(digest "$label" ${v#*:})
    [ "$d" = "$d1" ] || fail "$label: digest $d, 1 thread gave $d1"
done
# the BLAS path (--gemm blas) is thread-count independent too, on this machine
d2=$(digest "blas, 1 thread" FP4S_GEMM=blas FP4S_THREADS=1)
d3=$(digest "blas, 2 threads" FP4S_GEMM=blas FP4S_THREADS=2)
[ "$d2" = "$d3" ] || fail "FP4S_GEMM=blas: 1 and 2 threads give other digests"
failures_end
echo "digest: ok ($d1)"
