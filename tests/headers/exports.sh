#!/bin/sh
# Every dynamic symbol libfp4scope exports carries the fp4s_ prefix, and the
# soname is libfp4scope.so.<major> (the major of version.h).
set -eu
lib="$1"
bad=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^fp4s_' || true)
if [ -n "$bad" ]; then
    echo "exported symbols without the fp4s_ prefix:"; echo "$bad"; exit 1
fi
n=$(nm -D --defined-only "$lib" | wc -l)
[ "$n" -gt 50 ] || { echo "only $n exported symbols: visibility broken?"; exit 1; }
major=$(sed -n 's/^#define FP4S_VERSION_MAJOR \([0-9]*\)$/\1/p' "$FP4S_SRCDIR/lib/include/fp4scope/version.h")
objdump -p "$lib" | grep -q "SONAME *libfp4scope.so.$major\$" || { echo "soname is not libfp4scope.so.$major"; exit 1; }
echo "ok: $n exported symbols, all fp4s_*, soname libfp4scope.so.$major"
