#!/bin/sh
# The Python adapter (tools/python/fp4scope) over the built libfp4scope.so;
# FP4S_TORCH=1 (set when the tests' python has PyTorch) adds the PyTorch hook tests.
. "$(dirname "$0")/common.sh"
export FP4SCOPE_LIB="${FP4S_BUILDDIR:?}/libfp4scope.so"
export PYTHONPATH="$SRC/tools/python${PYTHONPATH:+:$PYTHONPATH}"
if [ "${FP4S_TORCH:-0}" = 1 ]; then
    "$PY" "$SRC/tests/capture/test_python.py" --torch
else
    "$PY" "$SRC/tests/capture/test_python.py"
fi
