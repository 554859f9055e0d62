#!/bin/bash
# The CPU scaling table of fp4-quant and fp4-decompose against the plain read,
# for 1 to 16 threads (bench/RESULTS-H200.md). Run on the GPU machine (16 cores)
# after scripts/device/setup.sh, or anywhere with a build:
#
#   scripts/device/cpu_scaling.sh BUILD_DIR [THREADS...]     (default 1 2 4 8 12 16)
#
# Makes a 1 GiB float32 .npy ([262144, 1024]; FP4S_SCALING_ROWS rows instead, gaussian rows times a random
# power of two per 32-block) in $TMPDIR (page cache warm after the first read),
# then for each thread count times, best of 3 (wall seconds, /usr/bin/time
# style from bash's TIMEFORMAT): the plain read (bench/bench_read: the same
# fp4s_source_read of every chunk, nothing else), fp4-quant -f mxfp4 -p ocp -o
# OUT.h5 (which ends with an fsync of the output), the same without an output
# (the summary alone: read and quantize), fp4-decompose -f mxfp4 and -f nvfp4
# (statistics are on: they are what it computes). Prints a markdown table: seconds and x of the plain read.
set -uo pipefail
B=${1:?usage: cpu_scaling.sh BUILD_DIR [THREADS...]}
shift
THREADS=${*:-1 2 4 8 12 16}
T=${TMPDIR:-/tmp}/fp4s_scaling
mkdir -p "$T"
X=$T/x.npy
if [ ! -f "$X" ]; then
    python3 - "$X" "${FP4S_SCALING_ROWS:-262144}" <<'PY'
import sys
rows, cols = int(sys.argv[2]), 1024
try:
    import numpy as np
except ImportError:  # small test runs without numpy: the same kind of data, slowly
    import array, random, struct
    random.seed(7)
    hdr = ("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)).encode()
    hdr += b" " * (127 - (10 + len(hdr)) % 128) + b"\n"
    with open(sys.argv[1], "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr)
        for _ in range(rows):
            a = array.array("f")
            for _ in range(cols // 32):
                s = 2.0 ** random.randint(-8, 7)
                a.extend(random.gauss(0, 1) * s for _ in range(32))
            f.write(a.tobytes())
    sys.exit(0)
rng = np.random.default_rng(7)
x = np.empty((rows, cols), np.float32)
step = min(rows, 16384)
for r0 in range(0, rows, step):
    b = rng.standard_normal((step, cols), dtype=np.float32)
    e = rng.integers(-8, 8, (step, cols // 32, 1)).astype(np.float32)
    x[r0:r0 + step] = (b.reshape(step, cols // 32, 32) * np.exp2(e)).reshape(step, cols)
np.save(sys.argv[1], x)
PY
fi
best() { # best of 3 wall seconds of a command (its output discarded; q.h5 removed before each)
    local b=999 t
    for _ in 1 2 3; do
        rm -f "$T/q.h5"
        t=$( { /usr/bin/env TIMEFORMAT=%R bash -c "time $* >/dev/null 2>&1" ; } 2>&1 | tail -1)
        b=$(python3 -c "print(min($b, $t))")
    done
    echo "$b"
}
cat "$X" > /dev/null
echo "cpu_scaling: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "cpu_scaling: input $X ($(du -h "$X" | cut -f1)), kernels $("$B"/tools/fp4-quant --version | sed -n 2p)"
echo
echo "| threads | plain read s | fp4-quant mxfp4 -o s | x read | fp4-quant mxfp4, summary only s | x read | fp4-decompose mxfp4 s | x read | fp4-decompose nvfp4 s | x read |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for n in $THREADS; do
    export FP4S_THREADS=$n
    r=$("$B"/bench/bench_read "$X" 3 | cut -d' ' -f2)
    q=$(best "'$B/tools/fp4-quant' -f mxfp4 -p ocp -o '$T/q.h5' '$X'")
    qs=$(best "'$B/tools/fp4-quant' -f mxfp4 -p ocp '$X'")
    dm=$(best "'$B/tools/fp4-decompose' -f mxfp4 --json '$X'")
    dn=$(best "'$B/tools/fp4-decompose' -f nvfp4 --json '$X'")
    python3 -c "r,q,s,a,b=$r,$q,$qs,$dm,$dn; print('| $n | %.3f | %.3f | %.2fx | %.3f | %.2fx | %.3f | %.2fx | %.3f | %.2fx |' % (r, q, q/r, s, s/r, a, a/r, b, b/r))"
    rm -f "$T/q.h5"
done
