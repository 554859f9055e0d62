#!/bin/sh
# Put the engines' own pure-PyTorch NVFP4 references into .device/engines (an
# ignored folder the device tool carries), for scripts/device/engine_refs.sh.
# Runs on the development machine, which holds the engines' git mirrors:
#
#   sh scripts/device/engine_refs_prepare.sh TE_GIT_DIR [COMMIT]
#
# TE_GIT_DIR is a git directory of NVIDIA/TransformerEngine (a bare mirror is
# fine), COMMIT the commit the profiles name (default d0067d0da, as te, te-row,
# te-row-4over6, te-4over6-fast and miles-nvfp4-train in lib/core/spec.c).
# Copied as they are, at that commit:
#   transformer_engine/pytorch/custom_recipes/reference_nvfp4.py
#   transformer_engine/pytorch/custom_recipes/reference_utils.py
# Nothing of the engine enters the repository. The rest of the package that
# reference_nvfp4.py imports (the quantized-tensor base classes and the GEMM
# helpers, which need TE's compiled extension) is replaced by the small
# stand-ins written below: the quantization path the script calls uses none
# of their behaviour (Quantizer.__init__ keeps rowwise/columnwise usage only).
set -eu
[ $# -ge 1 ] || { echo "usage: engine_refs_prepare.sh TE_GIT_DIR [COMMIT]" >&2; exit 2; }
G=$1
C=${2:-d0067d0da}
cd "$(dirname "$0")/../.."
D=.device/engines/te
full=$(git --git-dir="$G" rev-parse --verify "$C^{commit}") || { echo "engine_refs_prepare: $G has no commit $C" >&2; exit 3; }
rm -rf "$D"
P=$D/transformer_engine/pytorch
mkdir -p "$P/custom_recipes"
for f in reference_nvfp4.py reference_utils.py; do
    git --git-dir="$G" show "$full:transformer_engine/pytorch/custom_recipes/$f" > "$P/custom_recipes/$f"
done
: > "$D/transformer_engine/__init__.py"
: > "$P/__init__.py"
: > "$P/custom_recipes/__init__.py"
cat > "$P/custom_recipes/gemm.py" <<'PY'
"""Stand-in for TE's custom_recipes.gemm: reference_nvfp4.py names these two
in its GEMM method's signature (its GEMMs are not used by engine_refs.py)."""
import enum


class GEMMType(enum.Enum):
    FPROP = "fprop"
    DGRAD = "dgrad"
    WGRAD = "wgrad"


class MMParams:
    pass
PY
cat > "$P/quantized_tensor.py" <<'PY'
"""Stand-in for TE's quantized_tensor (the compiled extension is not needed
for the reference quantizer): the two base classes reference_nvfp4.py
derives from, with the one behaviour its _quantize reads."""


class QuantizedTensorStorage:
    pass


class Quantizer:
    def __init__(self, *, rowwise, columnwise):
        self.rowwise_usage = rowwise
        self.columnwise_usage = columnwise
PY
echo "$full" > "$D/COMMIT"
echo "engine_refs_prepare: TransformerEngine $full -> $D"
