#!/bin/sh
# Install the Debian packages fp4scope needs, only those that are missing.
# Run as root (or with sudo available). Used by the README quick start and .ci/run.
#   scripts/deps.sh            build, run and test dependencies
#   scripts/deps.sh --ci       also python3-torch (CPU), for the Python package's tests,
#                              python3-mesonpy and python3-venv (the test that pip-installs
#                              the package into a fresh virtual environment: pip install .),
#                              clang (CI builds the library with it too) and Open MPI
#                              (libopenmpi-dev openmpi-bin: -Dmpi, the tools over MPI
#                              ranks, which CI tests with 1 to 4 ranks)
#   scripts/deps.sh --browser  also chromium, for the test that renders fp4-report's page
#                              (about 110 MB to download and 400 MB installed, more than all
#                              the others together: not in --ci; without it that test skips)
set -eu
pkgs="build-essential meson ninja-build pkg-config libhdf5-dev hdf5-tools libgsl-dev check
libjansson-dev libopenblas-dev gnuplot-nox groff-base python3 python3-numpy python3-h5py"
for a in "$@"; do
    case "$a" in
    --ci) pkgs="$pkgs python3-torch python3-mesonpy python3-venv clang libopenmpi-dev openmpi-bin" ;;
    --browser) pkgs="$pkgs chromium" ;;
    *) echo "deps: unknown option '$a' (--ci, --browser)" >&2; exit 2 ;;
    esac
done
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "deps: all packages present"
    exit 0
fi
echo "deps: installing:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
