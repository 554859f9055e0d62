#!/bin/sh
# Independent numpy implementation vs the library's remedies (see numpy_check.py).
# $1: the rlinear_npy test driver; --no-tool skips fp4-remedy (a build without jansson has no tools).
set -eu
PY=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then echo "numpy_check: no python3 with numpy (python3-numpy is a test dependency)" >&2; exit 1; fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$PY" "$FP4S_SRCDIR/tests/remedy/numpy_check.py" "$T" "$@"
