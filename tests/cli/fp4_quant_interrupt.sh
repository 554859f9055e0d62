#!/bin/sh
# fp4-quant killed by SIGTERM/SIGINT in the middle of a run leaves neither
# outputs nor temporaries behind.
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"

$PY -c "
import numpy as np
np.save('big.in.npy', np.random.default_rng(1).standard_normal((4096, 4096), dtype=np.float32))
"
mkdir out
hit=0
for sig in TERM INT; do
    fp4s_pid=
    (sigdfl fp4-quant --ref --threads 1 --chunk-rows 16 -o out/q.h5 --codes out/c.npy --dequant out/d.npy big.in.npy >/dev/null 2>&1) &
    fp4s_pid=$!
    # wait until the temporaries exist, then interrupt
    n=0
    while [ -z "$(ls out)" ] && [ $n -lt 200 ]; do sleep 0.02; n=$((n + 1)); done
    if kill -s $sig $fp4s_pid 2>/dev/null; then
        hit=$((hit + 1))
        echo "interrupted by SIG$sig"
        set +e
        wait $fp4s_pid
        rc=$?
        set -e
        [ $rc -gt 128 ] || fail "SIG$sig: expected death by signal, exit $rc"
        left=$(ls -A out)
        [ -z "$left" ] || fail "SIG$sig left files behind: $left"
    else
        wait $fp4s_pid || true
        rm -f out/*
    fi
done
[ $hit -gt 0 ] || fail "fp4-quant finished before it could be interrupted (input too small for this machine?)"
echo ok
