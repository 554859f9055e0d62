#!/bin/sh
# Independent numpy implementation vs fp4-decompose / fp4-channels (see numpy_check.py).
set -eu
. "${FP4S_SRCDIR:?}/tests/python.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$PY" "$FP4S_SRCDIR/tests/decompose/numpy_check.py" "$T"
