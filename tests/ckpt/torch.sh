#!/bin/sh
# fp4-ckpt on a checkpoint made from a real PyTorch MoE, the audit's trainer
# side a capture of its forward pass: tests/ckpt/test_ckpt_torch.py.
. "$(dirname "$0")/../capture/common.sh"
export FP4SCOPE_LIB="${FP4S_BUILDDIR:?}/libfp4scope.so"
export PYTHONPATH="$SRC/tools/python${PYTHONPATH:+:$PYTHONPATH}"
export FP4S_CKPT_TOOL="${FP4S_BUILDDIR}/tools/fp4-ckpt"
cd "$T"
"$PY" "$SRC/tests/ckpt/test_ckpt_torch.py"
