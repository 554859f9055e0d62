#!/bin/sh
# Independent numpy implementation vs the library's remedies (see numpy_check.py).
# $1: the rlinear_npy test driver; --no-tool skips fp4-remedy (a build without jansson has no tools).
set -eu
. "${FP4S_SRCDIR:?}/tests/python.sh"
export FP4SCOPE_LIB="${FP4S_BUILDDIR:?}/libfp4scope.so"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$PY" "$FP4S_SRCDIR/tests/remedy/numpy_check.py" "$T" "$@"
