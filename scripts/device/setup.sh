#!/bin/sh
# Prepare the GPU machine (Ubuntu 24.04 with nvcc, meson, ninja, serial HDF5,
# but no jansson, GSL, Check or gnuplot, and no network) and build fp4scope.
#
#   scripts/device/setup.sh [NINJA_TARGET...]
#
# 1. Unpacks the Debian 12 .deb files in .device/debs (jansson, GSL, Check,
#    subunit; carried there by the device tool) into .device/root with dpkg -x.
# 2. Rewrites the /usr paths of their pkg-config files (prefix=, libdir=, and
#    GSL's hard-coded -L/-I) to .device/root/usr.
# 3. Writes .device/env.sh with PATH (nvcc), PKG_CONFIG_PATH, LD_LIBRARY_PATH,
#    CPATH and LIBRARY_PATH; source it to run what was built.
# 4. HDF5: meson's dependency('hdf5') asks pkg-config for 'hdf5'; Ubuntu's
#    serial HDF5 installs hdf5-serial.pc (headers in /usr/include/hdf5/serial).
#    If pkg-config knows no 'hdf5' but does know 'hdf5-serial', a one-line
#    hdf5.pc that requires hdf5-serial is written into .device/root.
# 5. meson setup $FP4S_DEVICE_BUILD (default build-device) with
#    -Dgnuplot=disabled -Dcuda=enabled, then ninja (the given targets, or all).
set -eu
cd "$(dirname "$0")/../.."
TOP=$(pwd)
ROOT=$TOP/.device/root
B=${FP4S_DEVICE_BUILD:-build-device}

if ! ls .device/debs/*.deb >/dev/null 2>&1; then
    echo "setup: no .device/debs/*.deb (pass carry: [\".device\"] to the device tool)" >&2
    exit 3
fi
rm -rf "$ROOT"
mkdir -p "$ROOT"
for d in .device/debs/*.deb; do
    dpkg -x "$d" "$ROOT"
done
PCDIR=$ROOT/usr/lib/x86_64-linux-gnu/pkgconfig
for pc in "$PCDIR"/*.pc; do
    # every /usr in these files is an install path (prefix=/usr, GSL's
    # libdir=/usr/lib/..., -L/usr/lib/..., -I/usr/include)
    sed -i "s|/usr|$ROOT/usr|g" "$pc"
done
LIBDIR=$ROOT/usr/lib/x86_64-linux-gnu
PKG_CONFIG_PATH=$PCDIR${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH
if ! pkg-config --exists hdf5 && pkg-config --exists hdf5-serial; then
    cat > "$PCDIR/hdf5.pc" <<PC
Name: hdf5
Description: serial HDF5 (shim for meson: requires hdf5-serial)
Version: $(pkg-config --modversion hdf5-serial)
Requires: hdf5-serial
PC
    echo "setup: hdf5: pkg-config hdf5-serial $(pkg-config --modversion hdf5-serial) (through a shim hdf5.pc)"
elif pkg-config --exists hdf5; then
    echo "setup: hdf5: pkg-config hdf5 $(pkg-config --modversion hdf5)"
else
    echo "setup: hdf5: no pkg-config file; meson will try the h5cc wrapper"
fi

CUDA_BIN=/usr/local/cuda/bin
cat > .device/env.sh <<ENV
export PATH="$CUDA_BIN:\$PATH"
export PKG_CONFIG_PATH="$PKG_CONFIG_PATH"
export LD_LIBRARY_PATH="$LIBDIR\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export CPATH="$ROOT/usr/include:/usr/include/hdf5/serial\${CPATH:+:\$CPATH}"
export LIBRARY_PATH="$LIBDIR\${LIBRARY_PATH:+:\$LIBRARY_PATH}"
ENV
. .device/env.sh
for p in jansson gsl check; do
    printf 'setup: %s %s\n' "$p" "$(pkg-config --modversion "$p")"
done
command -v nvcc >/dev/null && nvcc --version | tail -1

rm -rf "$B"
meson setup "$B" -Dgnuplot=disabled -Dcuda=enabled ${FP4S_MESON_ARGS:-}
# shellcheck disable=SC2068
ninja -C "$B" -j "$(nproc)" $@
