#!/bin/sh
# The functional capture of the Python adapter (tools/python/fp4scope/functional.py,
# engine.py) with real PyTorch: tests/capture/test_functional.py.
. "$(dirname "$0")/common.sh"
export FP4SCOPE_LIB="${FP4S_BUILDDIR:?}/libfp4scope.so"
export PYTHONPATH="$SRC/tools/python${PYTHONPATH:+:$PYTHONPATH}"
export FP4S_CAPTURE_TOOL="${FP4S_BUILDDIR}/tools/fp4-capture"
cd "$T"
"$PY" "$SRC/tests/capture/test_functional.py"
