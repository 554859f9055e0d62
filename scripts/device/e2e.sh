#!/bin/bash
# The tools end to end on a file in the page cache, against the plain read
# of that file (part e2e of cuda_check.sh; bench/RESULTS-H200.md):
#
#   scripts/device/e2e.sh BUILD_DIR
#
# Makes a float32 .npy of FP4S_E2E_GIB GiB (default 4: [262144, 4096];
# Gaussian blocks of 32 times a random power of two 2^-8..2^7, a NaN, an Inf
# and a zero block) and the same values rounded to BF16 as a .safetensors
# (half the bytes) in $TMPDIR, reads each once (page cache warm), then:
# the plain read (bench/bench_read: every row through fp4s_source_read, one
# thread) and cat; fp4-decompose by tensor (MXFP4 and NVFP4), fp4-channels
# (MXFP4) and fp4-quant (MXFP4, summary only and -o) with --device cuda and
# --device cpu (all threads), wall seconds, best of FP4S_E2E_REPS (default
# 3; the CPU FP4S_E2E_CPU_REPS, default 2, its channels not unless
# FP4S_E2E_CPU_CHANNELS says how often), and whether both devices print the
# same bytes (--json). Prints a markdown table with each time over the plain read.
# Exit 0 when every run succeeded and every comparison is equal.
set -uo pipefail
B=${1:?usage: e2e.sh BUILD_DIR}
T=${TMPDIR:-/tmp}/fp4s_e2e
mkdir -p "$T"
GIB=${FP4S_E2E_GIB:-4}
REPS=${FP4S_E2E_REPS:-3}
CREPS=${FP4S_E2E_CPU_REPS:-2}
X=$T/x.npy
XB=$T/xb.safetensors
if [ ! -s "$X" ] || [ ! -s "$XB" ]; then
    "${FP4S_PYTHON:-python3}" - "$X" "$XB" "$GIB" <<'PY'
import json, struct, sys
import numpy as np
path, bpath, gib = sys.argv[1], sys.argv[2], float(sys.argv[3])
cols = 4096
rows = int(gib * (1 << 30) / 4 / cols) // 16 * 16
rng = np.random.default_rng(7)
# a 256 MiB tile of Gaussian blocks times 2^k per block, repeated with
# another power of two per repetition (the kernels' work does not depend
# on which values repeat)
tr = min(rows, (1 << 26) // cols)
t = rng.standard_normal((tr, cols // 32, 32), dtype=np.float32)
t *= np.exp2(rng.integers(-8, 8, (tr, cols // 32, 1))).astype(np.float32)
t = t.reshape(tr, cols)
x = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, cols))
for i, r0 in enumerate(range(0, rows, tr)):
    n = min(tr, rows - r0)
    x[r0:r0 + n] = t[:n] * np.float32(2.0 ** ((i % 7) - 3))
x[5, 7] = np.nan
x[rows // 2, 100] = np.inf
x[rows - 1, 0:64] = 0
x.flush()
# BF16 (round to nearest even on the bits), as safetensors
hdr = json.dumps({"x": {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [0, rows * cols * 2]}})
hdr += " " * ((8 - len(hdr) % 8) % 8)
with open(bpath, "wb") as f:
    f.write(struct.pack("<Q", len(hdr)))
    f.write(hdr.encode())
    for r0 in range(0, rows, tr):
        u = np.asarray(x[r0:r0 + tr]).view(np.uint32)
        b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        b[(u & 0x7FFFFFFF) > 0x7F800000] = 0x7FC0
        f.write(b.tobytes())
PY
fi
[ -s "$X" ] && [ -s "$XB" ] || { echo "e2e: could not make $X" >&2; exit 1; }
cat "$X" "$XB" > /dev/null
export FP4S_PROGRESS=0
best() { # best REPS CMD...: the smallest wall time of REPS runs (seconds), stdout of the last in $T/last.out
    local n=$1 b=0 t t0
    shift
    for _ in $(seq "$n"); do
        t0=$(date +%s%N)
        "$@" > "$T/last.out" 2>"$T/err.txt" || { echo "FAILED"; cat "$T/err.txt" >&2; return 1; }
        t=$(( $(date +%s%N) - t0 ))
        if [ "$b" -eq 0 ] || [ "$t" -lt "$b" ]; then b=$t; fi
    done
    printf '%d.%03d' $((b / 1000000000)) $((b / 1000000 % 1000))
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a ~ /^[0-9.]+$/) printf "%.2fx", a / b; else print "-" }'; }
ok=1
read_x=$("$B/bench/bench_read" "$X" 3 | cut -d' ' -f2)
read_b=$("$B/bench/bench_read" "$XB:x" 3 | cut -d' ' -f2)
catnull() { cat "$1" > /dev/null; }
cat_x=$(best 3 catnull "$X")
cat_b=$(best 3 catnull "$XB")
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
echo "input: $X ($(du -h "$X" | cut -f1)) and $XB ($(du -h "$XB" | cut -f1)), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "plain read (bench_read, one thread): $read_x s float32, $read_b s BF16 (widened); cat: $cat_x s, $cat_b s"
echo "| tool | input | cuda s | x read | cpu s | x read | same output |"
echo "|---|---|---|---|---|---|---|"
D=$B/tools
run() { # run LABEL INPUT READ CPU_REPS CMD...: both devices, the table row
    local label=$1 in=$2 rd=$3 creps=$4
    shift 4
    local g c eq=no
    g=$(best "$REPS" "$@" --device cuda --json "$in") || ok=0
    cp "$T/last.out" "$T/g.json" 2>/dev/null
    if [ "$creps" -gt 0 ]; then
        c=$(best "$creps" "$@" --device cpu --json "$in") || ok=0
        # the same bytes but for the device's name (fp4-quant's summary says it)
        cmp -s <(sed 's/"device": *"[a-z]*"//' "$T/g.json") <(sed 's/"device": *"[a-z]*"//' "$T/last.out") && eq=yes
        [ $eq = yes ] || ok=0
    else
        c=-; eq=-
    fi
    echo "| $label | $(basename "$in") | $g | $(ratio "$g" "$rd") | $c | $(ratio "$c" "$rd") | $eq |"
}
run "fp4-decompose -f mxfp4" "$X" "$read_x" "$CREPS" "$D/fp4-decompose" -f mxfp4
run "fp4-decompose -f nvfp4" "$X" "$read_x" "$CREPS" "$D/fp4-decompose" -f nvfp4
run "fp4-decompose -f mxfp4" "$XB:x" "$read_b" "$CREPS" "$D/fp4-decompose" -f mxfp4
run "fp4-decompose -f nvfp4" "$XB:x" "$read_b" "$CREPS" "$D/fp4-decompose" -f nvfp4
run "fp4-channels -f mxfp4" "$X" "$read_x" "${FP4S_E2E_CPU_CHANNELS:-0}" "$D/fp4-channels" -f mxfp4
run "fp4-channels -f mxfp4 --chunk 67108864" "$X" "$read_x" 0 "$D/fp4-channels" -f mxfp4 --chunk 67108864
run "fp4-quant -f mxfp4 (summary)" "$X" "$read_x" "$CREPS" "$D/fp4-quant" -f mxfp4
# with -o (the outputs are not compared here: test_cuda_qstats and quant_device.sh do)
g=$(best "$REPS" "$D/fp4-quant" -f mxfp4 --device cuda -o "$T/o.h5" --force "$X") || ok=0
c=$(best "$CREPS" "$D/fp4-quant" -f mxfp4 --device cpu -o "$T/o.h5" --force "$X") || ok=0
echo "| fp4-quant -f mxfp4 -o OUT.h5 | $(basename "$X") | $g | $(ratio "$g" "$read_x") | $c | $(ratio "$c" "$read_x") | - |"
rm -f "$T/o.h5" "$T/g.json" "$T/last.out"
[ $ok = 1 ]
