#!/bin/sh
# compare_outputs.sh [--levels] [--threads] A B: the files tool_outputs.sh left in A and B
# are the same, byte for byte; HDF5 files by h5diff (every dataset and
# attribute, exactly: the files themselves differ in HDF5's object
# modification times), or where hdf5-tools is not installed by
# tests/h5check.py (h5py, FP4S_PYTHON: every byte of every dataset and
# attribute); exit 77 when there is neither. Prints every difference; exit 1 if there is any.
#
# --levels: A and B come from different CPU levels (FP4S_FORCE_REF=1 against
# the normal run). fp4-quant's JSON field "kernels" then names the level that
# ran and is left out of the comparison. Everything else stays byte for
# byte: every code, scale, dequantized value, counter and error statistic
# (JSON "rel_error", the packed file's stats_rel_error attribute: sqrt of
# exact sums, kernels/cpu/quant_sums.h), and every output of the other tools.
# --threads: A and B ran on different thread counts; fp4-quant's JSON field
# "threads" says how many and is left out the same way.
set -eu
skip=""
while :; do
    case ${1:-} in
    --levels) skip="$skip|kernels"; shift ;;
    --threads) skip="$skip|threads"; shift ;;
    *) break ;;
    esac
done
A=${1:?usage: compare_outputs.sh [--levels] [--threads] A B}
B=${2:?usage: compare_outputs.sh [--levels] [--threads] A B}
bad=0
n=0
SRC=${FP4S_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if command -v h5diff >/dev/null 2>&1; then
    h5same() { h5diff "$1" "$2"; }
elif [ -n "${FP4S_PYTHON:-}" ]; then
    h5same() { "$FP4S_PYTHON" "$SRC/tests/h5check.py" same "$1" "$2"; }
else
    echo "SKIP: neither h5diff (Debian: hdf5-tools) nor a python3 with h5py (-Dpython) to compare HDF5 outputs"
    exit 77
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/fp4s_cmp.XXXXXX")
trap 'rm -rf "$T"' EXIT

# strip FILE: the file without the fields named by the options
strip() { grep -v -E "^ *\"(${skip#|})\":" "$1" || true; }

for fa in "$A"/*; do
    f=${fa##*/}
    fb=$B/$f
    n=$((n + 1))
    if [ ! -e "$fb" ]; then
        echo "DIFF $f: missing in $B"; bad=$((bad + 1)); continue
    fi
    case $f in
    *.h5)
        h5same "$fa" "$fb" > "$T/h5" 2>&1 && continue
        echo "DIFF $f:"; head -20 "$T/h5"; bad=$((bad + 1)) ;;
    *)
        cmp -s "$fa" "$fb" && continue
        if [ -n "$skip" ] && grep -q -E "^  \"(${skip#|})\":" "$fa"; then
            strip "$fa" > "$T/a"; strip "$fb" > "$T/b"
            if cmp -s "$T/a" "$T/b"; then continue; fi
        fi
        echo "DIFF $f:"; diff "$fa" "$fb" 2>/dev/null | head -20 || true; bad=$((bad + 1)) ;;
    esac
done
for fb in "$B"/*; do
    [ -e "$A/${fb##*/}" ] || { echo "DIFF ${fb##*/}: missing in $A"; bad=$((bad + 1)); }
done
echo "compare_outputs: $n files, $bad differ"
[ $bad = 0 ]
