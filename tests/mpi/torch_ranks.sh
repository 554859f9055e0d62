#!/bin/sh
# tests/mpi/torch_ranks.py in a scratch folder, over the built library.
set -eu
W=$(mktemp -d /tmp/fp4s_ranks_XXXXXX)
trap 'rm -rf "$W"' EXIT
export FP4SCOPE_LIB="${FP4S_BUILDDIR:?}/libfp4scope.so"
export PYTHONPATH="${FP4S_SRCDIR:?}/tools/python${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS=1
"${FP4S_TORCH_PY:?}" "$FP4S_SRCDIR/tests/mpi/torch_ranks.py" "$W"
