#!/bin/sh
# Whole-process comparison of issue 2, section 6: `fp4-quant -f mxfp4 -p ocp -o
# OUT.h5 IN.npy` against bench/scalar_baseline (a plain per-element C loop
# doing the same job) on 64M float32 values (8192 x 8192, 256 MiB), into packed
# HDF5. Prints wall/user/sys seconds of each run (best of N), the speedup, and
# checks that both wrote the same packed codes and scales.
#
#   bench/whole_process.sh [BUILD_DIR] [RUNS]     (default: build, 3)
#
# Needs python3 with numpy and h5py (Debian: python3-numpy python3-h5py) to
# make the input and compare the outputs, and /usr/bin/time.
set -eu
B=${1:-build}
N=${2:-3}
case "$B" in /*) ;; *) B="$(pwd)/$B" ;; esac
FQ="$B/tools/fp4-quant"
SB="$B/bench/scalar_baseline"
for p in "$FQ" "$SB"; do
    [ -x "$p" ] || { echo "whole_process: $p: not built (ninja -C $B)" >&2; exit 2; }
done
PY=${PYTHON:-python3}
if ! "$PY" -c 'import numpy, h5py' 2>/dev/null; then PY=/usr/bin/python3; fi
"$PY" -c 'import numpy, h5py' || { echo "whole_process: needs python3 with numpy and h5py" >&2; exit 2; }

W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT INT TERM
"$PY" - "$W/in.npy" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(1)
x = rng.standard_normal((8192, 8192), dtype=np.float32) * np.float32(0.02)
x[::97, :] *= np.float32(50)       # a few outlier rows
np.save(sys.argv[1], x)
PY

best() { # best <label> <command...>: run N times, keep the lowest wall time
    label=$1; shift
    b=""
    i=0
    while [ "$i" -lt "$N" ]; do
        /usr/bin/time -f "%e %U %S" -o "$W/t" "$@" >/dev/null
        read -r w u s < "$W/t"
        echo "  $label run $((i + 1)): wall ${w}s user ${u}s sys ${s}s"
        if [ -z "$b" ] || awk -v w="$w" -v b="$b" 'BEGIN { exit !(w < b) }'; then b=$w; fi
        i=$((i + 1))
    done
    eval "best_$label=$b"
}

echo "whole_process: 8192 x 8192 float32 (256 MiB .npy, page cache warm after the first run)"
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
best fp4quant "$FQ" -f mxfp4 -p ocp -o "$W/fq.h5" "$W/in.npy"
best baseline "$SB" "$W/in.npy" "$W/sb.h5"
echo "best wall: fp4-quant ${best_fp4quant}s, scalar_baseline ${best_baseline}s, speedup $(awk -v a="$best_baseline" -v b="$best_fp4quant" 'BEGIN { printf "%.1f", a / b }')x"
"$PY" - "$W/fq.h5" "$W/sb.h5" <<'PY'
import sys
import h5py
import numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
same = all(np.array_equal(a[k][...], b[k][...]) for k in ("codes", "scales"))
print("outputs: packed codes and scales", "identical" if same else "DIFFER")
sys.exit(0 if same else 1)
PY
