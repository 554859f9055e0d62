#!/bin/sh
# compare_outputs.sh [--levels] A B: the files tool_outputs.sh left in A and B
# are the same, byte for byte; HDF5 files by h5diff (every dataset and
# attribute, exactly: the files themselves differ in HDF5's object
# modification times). Prints every difference; exit 1 if there is any.
#
# --levels: A and B come from different CPU levels (FP4S_FORCE_REF=1 against
# the normal run). Two things of fp4-quant then differ by design and are
# checked apart: its JSON field "kernels" names the level that ran, and its
# error statistic (JSON "rel_error", the packed file's stats_rel_error
# attribute) is sqrt(err2/x2) of sums that each kernel accumulates in its own
# order (quant.h: they differ in the last bits, as between thread counts); it
# must agree to 1e-12 relative. Every code, scale, dequantized value and
# counter, and every output of the other tools, stays byte for byte.
set -eu
levels=0
if [ "${1:-}" = --levels ]; then levels=1; shift; fi
A=${1:?usage: compare_outputs.sh [--levels] A B}
B=${2:?usage: compare_outputs.sh [--levels] A B}
bad=0
n=0
T=$(mktemp -d "${TMPDIR:-/tmp}/fp4s_cmp.XXXXXX")
trap 'rm -rf "$T"' EXIT

# close FILE_A FILE_B: the numbers, one a line, agree pairwise (equal, or
# within 1e-12 relative)
close() {
    [ "$(wc -l < "$1")" = "$(wc -l < "$2")" ] || return 1
    paste -d ' ' "$1" "$2" | awk '$1 == $2 { next } { d = $1 - $2; if (d < 0) d = -d; m = $1 < 0 ? -$1 : $1;
                                                    if (!(d <= 1e-12 * m)) bad = 1 } END { exit bad }'
}
# strip FILE: the file without fp4-quant's level-dependent fields
strip() { grep -v -E '^ *"(kernels|rel_error)":' "$1" || true; }
relerr() { sed -n 's/^ *"rel_error": \([^,]*\),*$/\1/p' "$1"; }
h5attr() { h5dump -m %.17g -a /stats_rel_error "$1" | sed -n 's/^ *(0): \(.*\)$/\1/p'; }

for fa in "$A"/*; do
    f=${fa##*/}
    fb=$B/$f
    n=$((n + 1))
    if [ ! -e "$fb" ]; then
        echo "DIFF $f: missing in $B"; bad=$((bad + 1)); continue
    fi
    case $f in
    *.h5)
        h5diff "$fa" "$fb" > "$T/h5" 2>&1 && continue
        if [ $levels = 1 ] && [ "$(grep -c . "$T/h5")" = 2 ] &&
           grep -q '^attribute: <stats_rel_error of </>> and <stats_rel_error of </>>$' "$T/h5" &&
           grep -q '^1 differences found$' "$T/h5" && h5attr "$fa" > "$T/ra" && h5attr "$fb" > "$T/rb" &&
           close "$T/ra" "$T/rb"; then
            continue
        fi
        echo "DIFF $f: h5diff:"; head -20 "$T/h5"; bad=$((bad + 1)) ;;
    *)
        cmp -s "$fa" "$fb" && continue
        if [ $levels = 1 ] && grep -q '^  "kernels":' "$fa"; then
            strip "$fa" > "$T/a"; strip "$fb" > "$T/b"
            relerr "$fa" > "$T/ra"; relerr "$fb" > "$T/rb"
            if cmp -s "$T/a" "$T/b" && close "$T/ra" "$T/rb"; then continue; fi
        fi
        echo "DIFF $f:"; diff "$fa" "$fb" 2>/dev/null | head -20 || true; bad=$((bad + 1)) ;;
    esac
done
for fb in "$B"/*; do
    [ -e "$A/${fb##*/}" ] || { echo "DIFF ${fb##*/}: missing in $A"; bad=$((bad + 1)); }
done
echo "compare_outputs: $n files, $bad differ"
[ $bad = 0 ]
