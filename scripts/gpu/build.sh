# Sourced by the GPU-machine scripts: gpu_build BUILD "MESON_ARGS" TARGET...
# builds the ninja targets in BUILD. The machine has serial HDF5 (headers in
# /usr/include/hdf5/serial) but no jansson/GSL/Check/gnuplot: when the Debian
# packages are carried in .device/debs, scripts/device/setup.sh unpacks them
# and configures the build (and .device/env.sh is sourced here); otherwise
# meson is run directly (then jansson must be installed), with a one-line
# hdf5.pc shim when pkg-config knows only hdf5-serial.
gpu_build() {
    _b=$1 _args=$2
    shift 2
    if ls .device/debs/*.deb >/dev/null 2>&1; then
        FP4S_DEVICE_BUILD=$_b FP4S_MESON_ARGS="$_args" sh scripts/device/setup.sh "$@"
        . .device/env.sh
    else
        export CPATH="/usr/include/hdf5/serial${CPATH:+:$CPATH}"
        if ! pkg-config --exists hdf5 && pkg-config --exists hdf5-serial; then
            mkdir -p "$_b-pc"
            printf 'Name: hdf5\nDescription: shim\nVersion: %s\nRequires: hdf5-serial\n' \
                "$(pkg-config --modversion hdf5-serial)" > "$_b-pc/hdf5.pc"
            export PKG_CONFIG_PATH="$(pwd)/$_b-pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
        fi
        # shellcheck disable=SC2086
        [ -d "$_b" ] || meson setup "$_b" $_args -Dgnuplot=disabled
        ninja -C "$_b" -j "$(nproc)" "$@"
    fi
}
