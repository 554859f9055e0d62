#!/bin/sh
# On the GPU machine: build fp4scope (library and the tools the MoE run
# needs) and run scripts/gpu/moe_capture.py, writing to $OUT (the device
# tool's output folder) or ./out-moe.
#
#   scripts/gpu/run_moe.sh [moe_capture.py options]
#
# The machine has serial HDF5 (headers in /usr/include/hdf5/serial) but no
# jansson/GSL/Check/gnuplot: when the Debian packages are carried in
# .device/debs, scripts/device/setup.sh unpacks them and configures the build;
# otherwise meson is run directly (then jansson must be installed).
set -eu
cd "$(dirname "$0")/../.."
B=${FP4S_MOE_BUILD:-build-moe}
OUT=${OUT:-$(pwd)/out-moe}
TARGETS="tools/fp4-capture tools/fp4-decompose tools/fp4-channels tools/fp4-quant"
if ls .device/debs/*.deb >/dev/null 2>&1; then
    FP4S_DEVICE_BUILD=$B FP4S_MESON_ARGS="-Dtests=disabled -Dgsl=disabled" \
        sh scripts/device/setup.sh $TARGETS
    . .device/env.sh
else
    export CPATH="/usr/include/hdf5/serial${CPATH:+:$CPATH}"
    if ! pkg-config --exists hdf5 && pkg-config --exists hdf5-serial; then
        mkdir -p "$B-pc"
        printf 'Name: hdf5\nDescription: shim\nVersion: %s\nRequires: hdf5-serial\n' \
            "$(pkg-config --modversion hdf5-serial)" > "$B-pc/hdf5.pc"
        export PKG_CONFIG_PATH="$(pwd)/$B-pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    fi
    [ -d "$B" ] || meson setup "$B" -Dtests=disabled -Dgsl=disabled -Dgnuplot=disabled
    # shellcheck disable=SC2086
    ninja -C "$B" -j "$(nproc)" $TARGETS
fi
export FP4SCOPE_LIB="$(pwd)/$B/libfp4scope.so"
export PATH="$(pwd)/$B/tools:$PATH"
mkdir -p "$OUT"
python3 -c 'import torch, numpy, h5py; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
set +e
python3 scripts/gpu/moe_capture.py --out "$OUT" "$@" > "$OUT/moe_capture.log" 2>&1
rc=$?
cat "$OUT/moe_capture.log"
exit $rc
