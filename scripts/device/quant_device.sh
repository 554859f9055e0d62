#!/bin/bash
# fp4-quant --device cuda against --device cpu on one 1 GiB float32 tensor
# (part quant of cuda_check.sh; bench/RESULTS-H200.md):
#
#   scripts/device/quant_device.sh BUILD_DIR
#
# Makes a 1 GiB float32 .npy ([262144, 1024]; FP4S_QDEV_ROWS rows instead:
# Gaussian rows times a random power of two per 32-block, a few NaN, Inf and
# zero blocks) in $TMPDIR, reads it once (page cache warm), then for MXFP4
# and NVFP4: the plain read (bench/bench_read), fp4-quant with the summary
# only and with -o OUT.h5 on each device (best of FP4S_QDEV_REPS, default 2,
# wall seconds; the CPU on all its threads), and whether the two devices
# give the same bytes: the --json summary (every counter and err2/x2) and
# the --codes and --scales outputs, compared with cmp. Prints a markdown
# table. Exit 0 when every comparison is equal, 1 otherwise. (FP4S_QDEV_GPU=auto
# tries the script on a machine without a GPU.)
set -uo pipefail
B=${1:?usage: quant_device.sh BUILD_DIR}
T=${TMPDIR:-/tmp}/fp4s_qdev
mkdir -p "$T"
X=$T/x.npy
ROWS=${FP4S_QDEV_ROWS:-262144}
REPS=${FP4S_QDEV_REPS:-2}
if [ ! -s "$X" ]; then
    "${FP4S_PYTHON:-python3}" - "$X" "$ROWS" <<'PY'
import sys
import numpy as np
rows, cols = int(sys.argv[2]), 1024
rng = np.random.default_rng(11)
x = np.empty((rows, cols), np.float32)
step = min(rows, 16384)
for r0 in range(0, rows, step):
    n = min(step, rows - r0)
    b = rng.standard_normal((n, cols), dtype=np.float32)
    e = rng.integers(-8, 8, (n, cols // 32, 1)).astype(np.float32)
    x[r0:r0 + n] = (b.reshape(n, cols // 32, 32) * np.exp2(e)).reshape(n, cols)
x[5, 7] = np.nan
x[rows // 2, 100] = np.inf
x[rows - 1, 0:64] = 0
np.save(sys.argv[1], x)
PY
fi
[ -s "$X" ] || { echo "quant_device: could not make $X" >&2; exit 1; }
cat "$X" > /dev/null
export FP4S_PROGRESS=0
best() { # best REPS CMD...: the smallest wall time of REPS runs (seconds)
    local n=$1 b=0 t t0
    shift
    for _ in $(seq "$n"); do
        t0=$(date +%s%N)
        "$@" > /dev/null 2>"$T/err.txt" || { echo "FAILED"; cat "$T/err.txt" >&2; return 1; }
        t=$(( $(date +%s%N) - t0 ))
        if [ "$b" -eq 0 ] || [ "$t" -lt "$b" ]; then b=$t; fi
    done
    printf '%d.%03d' $((b / 1000000000)) $((b / 1000000 % 1000))
}
Q=$B/tools/fp4-quant
ok=1
read_s=NA
[ -x "$B/bench/bench_read" ] && read_s=$("$B/bench/bench_read" "$X" 3 | cut -d' ' -f2)
echo "input: $X ($(du -h "$X" | cut -f1)), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); plain read: $read_s s"
echo "| format | device | summary s | -o OUT.h5 s | summary equal | codes equal | scales equal |"
echo "|---|---|---|---|---|---|---|"
for f in mxfp4 nvfp4; do
    for d in cpu ${FP4S_QDEV_GPU:-cuda}; do
        s1=$(best "$REPS" "$Q" -f $f --device $d --json "$X") || ok=0
        s2=$(best "$REPS" "$Q" -f $f --device $d -o "$T/o_$d.h5" --force "$X") || ok=0
        # the same output names on both devices: the summary names them
        rm -f "$T/c.npy" "$T/s.npy" "$T/c_$d.npy" "$T/s_$d.npy" "$T/j_$d.json"
        if "$Q" -f $f --device $d --json --codes "$T/c.npy" --scales "$T/s.npy" "$X" > "$T/j_$d.json" 2>"$T/err.txt"; then
            mv "$T/c.npy" "$T/c_$d.npy"
            mv "$T/s.npy" "$T/s_$d.npy"
        else
            ok=0
            cat "$T/err.txt" >&2
            rm -f "$T/j_$d.json"
        fi
        eq_j=-; eq_c=-; eq_s=-
        if [ $d != cpu ]; then
            eq_j=no; eq_c=no; eq_s=no
            if [ -s "$T/j_cpu.json" ] && [ -s "$T/j_$d.json" ]; then
                cmp -s "$T/j_cpu.json" "$T/j_$d.json" && eq_j=yes
                cmp -s "$T/c_cpu.npy" "$T/c_$d.npy" && eq_c=yes
                cmp -s "$T/s_cpu.npy" "$T/s_$d.npy" && eq_s=yes
            fi
            [ "$eq_j$eq_c$eq_s" = yesyesyes ] || ok=0
        fi
        echo "| $f | $d | $s1 | $s2 | $eq_j | $eq_c | $eq_s |"
    done
    rm -f "$T"/c_*.npy "$T"/s_*.npy "$T"/o_*.h5
done
[ $ok = 1 ]
