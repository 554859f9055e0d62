#!/bin/sh
# slow: 10^8 tokens (100 steps of 10^6) stream in bounded memory: the peak RSS
# of bench_mismatch's analysis stays under 512 MiB. Needs ~1.6 GB in TMPDIR.
set -eu
. "$FP4S_SRCDIR/tests/mismatch/common.sh"
B=${FP4S_BUILDDIR:?}/bench/bench_mismatch
[ -x "$B" ] || fail "$B not built (run ninja first)"
"$B" --tokens 100000000 --steps 100 --csv-tokens 0 --repeat 1 --dir "$T" | tee bench.txt
rss=$(sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p' bench.txt)
[ -n "$rss" ] || fail "no RSS in the output"
$PY -c "import sys; sys.exit(0 if float(sys.argv[1]) < 512 else 1)" "$rss" || fail "peak RSS $rss MiB >= 512 MiB"
grep -q "hdf5: 100000000 tokens in 100 steps" bench.txt || fail "not all tokens analysed"
echo "ok: peak RSS $rss MiB"
