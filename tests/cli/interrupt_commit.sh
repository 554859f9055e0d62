#!/bin/sh
# A signal at any moment of a run with several outputs (fp4-quant -o, --codes,
# --scales, --dequant) leaves either every output replaced or none of them,
# and no temporary or journal (issue 8, item 5). The signals land at random
# times around the end of the run, where the outputs are committed.
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"

$PY -c "
import numpy as np
np.save('x.in.npy', np.random.default_rng(2).standard_normal((1024, 4096), dtype=np.float32))
"
outs="q.h5 c.npy s.npy d.npy"
run() { sigdfl fp4-quant --threads 1 --force -p "$1" -o q.h5 --codes c.npy --scales s.npy --dequant d.npy x.in.npy; }
sums() { for f in $outs; do cksum "$f"; done; }

# the outputs of a first, complete run; then time a run (in ms)
(run ocp >/dev/null)
start=$(date +%s%N)
(run ceil >/dev/null)
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$ms" -gt 0 ] || ms=1
echo "one run: $ms ms"

i=0 all=0 none=0
profile=ocp
for sig in INT TERM HUP INT TERM HUP INT TERM HUP INT TERM HUP INT TERM HUP INT TERM HUP; do
    i=$((i + 1))
    sums >before.txt
    # a delay between 30% and 100% of a run: the commit is at its end
    delay_ms=$(( ms * 30 / 100 + $($PY -c "import random; print(random.randrange(0, $ms * 70 // 100 + 1))") ))
    (run $profile >/dev/null 2>&1) &
    pid=$!
    $PY -c "import time; time.sleep($delay_ms / 1000)"
    kill -s $sig $pid 2>/dev/null || true
    set +e
    wait $pid
    rc=$?
    set -e
    sums >after.txt
    changed=0
    for f in $outs; do
        grep -q " $f\$" before.txt || fail "no $f before"
        [ "$(grep " $f\$" before.txt)" = "$(grep " $f\$" after.txt)" ] || changed=$((changed + 1))
    done
    left=$(ls -A | grep -e '\.tmp\.' -e '\.fp4s-commit' || true)
    [ -z "$left" ] || { cat ./*.fp4s-commit >&2 2>/dev/null; fail "SIG$sig after $delay_ms ms (exit $rc, pid $pid) left $left"; }
    case $changed in
    0) none=$((none + 1)) ;;
    4) all=$((all + 1)); [ $profile = ocp ] && profile=ceil || profile=ocp ;;
    *) fail "SIG$sig after $delay_ms ms (exit $rc): $changed of the 4 outputs replaced" ;;
    esac
    echo "$i: SIG$sig after $delay_ms ms, exit $rc: $changed of 4 outputs replaced"
done
echo "ok: $all runs replaced all four outputs, $none replaced none"
