#!/bin/sh
# The layers include downward only: lib/base (errors, threads, exact sums,
# number codecs, dynamic loading) includes nothing of the project but itself,
# the public headers and the build's fp4s_config.h; kernels/cpu includes only
# lib/base and itself; kernels/cuda nothing of lib/core. A file that reaches
# up fails here, naming the include.
set -eu
SRC=${FP4S_SRCDIR:?}
bad=0 n=0
check() { # check DIR ALLOWED-PATTERN: every quoted include of DIR's files matches the pattern
    for f in $(find "$SRC/$1" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \)); do
        for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
            n=$((n + 1))
            printf '%s\n' "$inc" | grep -Eq "$2" ||
                { echo "FAIL: ${f#"$SRC"/} includes \"$inc\": $1 may include only $2" >&2; bad=1; }
        done
    done
}
check lib/base '^(base/[a-z_]+\.h|fp4s_config\.h|approx_table\.c)$'
check kernels/cpu '^(base/[a-z_]+\.h|cpu/[a-z_]+\.h|fp4s_config\.h)$'
check kernels/cuda '^([^c]|c[^o]|co[^r]|cor[^e]|core[^/])'
[ "$n" -gt 0 ] || { echo "FAIL: no includes found (the patterns are broken)" >&2; exit 1; }
[ "$bad" -eq 0 ] || exit 1
echo "layers: $n includes of lib/base and kernels, all downward"
