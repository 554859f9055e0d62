#!/bin/sh
# A program builds against the build tree, without installing, through
# pkg-config's fp4scope-uninstalled (build/meson-uninstalled): the EXAMPLE of
# libfp4scope(3) compiles with its Cflags and Libs and runs (the Cflags lacked
# lib/include, so <fp4scope/...> was not found).
set -eu
command -v pkg-config >/dev/null 2>&1 || { echo "no pkg-config: skipped"; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
awk '/^\.SH EXAMPLE/{on=1; next} on && /^\.nf/{inb=1; next} inb && /^\.fi/{exit} inb{print}' \
    "$FP4S_SRCDIR/man/libfp4scope.3" | sed 's/\\e/\\/g' > "$T/ex.c"
[ -s "$T/ex.c" ] || { echo "no EXAMPLE found"; exit 1; }
export PKG_CONFIG_PATH="$FP4S_BUILDDIR/meson-uninstalled"
flags=$(pkg-config --cflags --libs fp4scope-uninstalled)
${CC:-cc} -std=c11 -Wall -Werror -o "$T/ex" "$T/ex.c" $flags -lm
out=$(LD_LIBRARY_PATH="$FP4S_BUILDDIR" "$T/ex" "$FP4S_SRCDIR/datasets/weight-small.npy")
echo "$out"
case $out in "relative error "*) ;; *) echo "unexpected output"; exit 1 ;; esac
echo ok
