#!/bin/sh
# The EXAMPLE of libfp4scope(3) compiles against the INSTALLED library (meson
# install into a temporary DESTDIR, then its pkg-config file) and runs on the
# shipped weight, giving the relative error fp4-quant reports.
set -eu
. "${FP4S_SRCDIR:?}/tests/python.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
awk '/^\.SH EXAMPLE/{on=1; next} on && /^\.nf/{inb=1; next} inb && /^\.fi/{exit} inb{print}' \
    "$FP4S_SRCDIR/man/libfp4scope.3" | sed 's/\\e/\\/g' > "$T/ex.c"
[ -s "$T/ex.c" ] || { echo "no EXAMPLE found"; exit 1; }
meson install -C "$FP4S_BUILDDIR" --destdir "$T/root" --no-rebuild --quiet >/dev/null
pc=$(find "$T/root" -name fp4scope.pc | head -n 1)
[ -n "$pc" ] || { echo "fp4scope.pc not installed"; exit 1; }
prefix=$(sed -n 's/^prefix=//p' "$pc")
export PKG_CONFIG_PATH="$(dirname "$pc")"
flags=$(pkg-config --define-variable=prefix="$T/root$prefix" --cflags --libs fp4scope)
libdir=$(pkg-config --define-variable=prefix="$T/root$prefix" --variable=libdir fp4scope)
${CC:-cc} -std=c11 -Wall -Werror -o "$T/ex" "$T/ex.c" $flags -lm
out=$(LD_LIBRARY_PATH="$libdir" "$T/ex" "$FP4S_SRCDIR/datasets/weight-small.npy")
echo "$out"
# the NVFP4 te relative error of this weight, as fp4-quant reports it
want=$(fp4-quant -f nvfp4 -p te --json "$FP4S_SRCDIR/datasets/weight-small.npy" |
       "$PY" -c 'import json,sys; print("%g" % json.load(sys.stdin)["rel_error"])')
[ "$out" = "relative error $want" ] || { echo "expected 'relative error $want'"; exit 1; }
