#!/bin/sh
# Every dynamic symbol libfp4scope exports carries the fp4s_ prefix, every
# function a public header declares with FP4S_API is exported (the size
# queries and fp4s_error_clear among them), and the soname is
# libfp4scope.so.<major> (the major of version.h).
set -eu
lib="$1"
syms=$(nm -D --defined-only "$lib" | awk '{print $3}')
bad=$(printf '%s\n' "$syms" | grep -v '^fp4s_' || true)
if [ -n "$bad" ]; then
    echo "exported symbols without the fp4s_ prefix:"; echo "$bad"; exit 1
fi
n=$(printf '%s\n' "$syms" | wc -l)
[ "$n" -gt 50 ] || { echo "only $n exported symbols: visibility broken?"; exit 1; }
# FP4S_API declarations: the identifier before the first '(' of the line
declared=$(cat "$FP4S_SRCDIR"/lib/include/fp4scope/*.h | grep '^FP4S_API ' |
    sed -n 's/^FP4S_API[^(]*[^A-Za-z0-9_]\(fp4s_[A-Za-z0-9_]*\) *(.*/\1/p' | sort -u)
nd=$(printf '%s\n' "$declared" | wc -l)
[ "$nd" -gt 50 ] || { echo "only $nd FP4S_API functions found in the headers: parsing broken?"; exit 1; }
missing=$(printf '%s\n' "$declared" | while read -r f; do
    printf '%s\n' "$syms" | grep -qx "$f" || echo "$f"; done)
if [ -n "$missing" ]; then
    echo "declared FP4S_API in a public header but not exported:"; echo "$missing"; exit 1
fi
major=$(sed -n 's/^#define FP4S_VERSION_MAJOR \([0-9]*\)$/\1/p' "$FP4S_SRCDIR/lib/include/fp4scope/version.h")
objdump -p "$lib" | grep -q "SONAME *libfp4scope.so.$major\$" || { echo "soname is not libfp4scope.so.$major"; exit 1; }
echo "ok: $n exported symbols, all fp4s_*; the $nd FP4S_API functions of the headers among them; soname libfp4scope.so.$major"
