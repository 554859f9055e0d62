#!/bin/sh
# Scale (slow suite): a capture with 10,000 datasets is listed by
# fp4-capture ls in under a second (target; the time is printed, and the test
# fails only beyond 5 s so that a loaded machine does not make it flaky).
. "$(dirname "$0")/common.sh"
C=fp4-capture
# 50 steps x 100 sites x 2 sides = 10,000 datasets, 1 x 16 float32 each
$C synth -o "$T/big.h5" --steps 50 --act-every 1 --layers 50 --experts 0 --tokens 1 --hidden 16 \
    --out-features 0 --hot-channels 0 --seqs 0 --gzip 0
n=$($C ls --json "$T/big.h5" | grep -c '"path"')
[ "$n" = 10000 ] || fail "expected 10000 datasets, found $n"
start=$(date +%s.%N)
$C ls "$T/big.h5" > /dev/null
end=$(date +%s.%N)
t=$(echo "$end - $start" | bc)
echo "fp4-capture ls on 10000 datasets: $t s"
[ "$(echo "$t < 5" | bc)" = 1 ] || fail "ls took $t s"
echo ok
