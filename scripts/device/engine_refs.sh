#!/bin/sh
# TransformerEngine's own NVFP4 reference quantizer (reference_nvfp4.py, from
# TE's source) against fp4scope's TE profiles, per-tensor and row-scaled, on
# the conformance corpus's hostile inputs, on the CPU and the GPU. Runs on the
# GPU machine (PyTorch >= 2.1 there; no network, nothing built):
#
#   sh scripts/device/engine_refs.sh            (device tool: carry [".device"])
#
# Before, on the development machine (TE's git mirror there):
#   sh scripts/device/engine_refs_prepare.sh /work/.mirror/NVIDIA+TransformerEngine/repo
# which copies TE's two reference files at d0067d0da into .device/engines/te.
# Writes engine_refs.txt to $OUT when set. Exit 0: every code, scale and row
# amax equal; 1: a difference (listed); 3: TE's files are missing.
set -eu
cd "$(dirname "$0")/../.."
D=.device/engines/te
if [ ! -f "$D/transformer_engine/pytorch/custom_recipes/reference_nvfp4.py" ]; then
    echo "engine_refs: no $D (run scripts/device/engine_refs_prepare.sh on the development machine," \
        "then carry .device)" >&2
    exit 3
fi
echo "TransformerEngine $(cat "$D/COMMIT")"
PYTHONPATH=$D${PYTHONPATH:+:$PYTHONPATH} python3 scripts/device/engine_refs.py tests/conformance/vectors.txt \
    ${OUT:+"$OUT/engine_refs.txt"}
