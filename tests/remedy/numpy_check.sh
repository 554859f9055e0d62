#!/bin/sh
# Independent numpy implementation vs the library's remedies (see numpy_check.py).
# $1: the rlinear_npy test driver; --no-tool skips fp4-remedy (a build without jansson has no tools).
set -eu
PY=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy, h5py' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then echo "numpy_check: no python3 with numpy and h5py (test dependencies)" >&2; exit 1; fi
export FP4SCOPE_LIB="${FP4S_BUILDDIR:?}/libfp4scope.so"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$PY" "$FP4S_SRCDIR/tests/remedy/numpy_check.py" "$T" "$@"
