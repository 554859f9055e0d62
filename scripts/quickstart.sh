#!/bin/sh
# Quick start: install what is missing (Debian packages), build fp4scope into
# build/, and run the main job on the shipped data (scripts/demo.sh).
#   sudo scripts/quickstart.sh        (or as root)
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh
B=${FP4S_BUILD:-build}
if [ ! -f "$B/build.ninja" ]; then
    # shellcheck disable=SC2086
    meson setup "$B" ${FP4S_MESON_ARGS:-}
fi
ninja -C "$B"
exec sh scripts/demo.sh "$B"
