#!/bin/sh
# Build fp4scope (configuring it on first use) and run the default test suite.
#   scripts/test.sh                        default suites (fast)
#   scripts/test.sh --setup full           everything, including the 'slow' suite
#   scripts/test.sh --setup full --suite slow   only the exhaustive / large suites
# The build directory is $FP4S_BUILD (default: build); $FP4S_MESON_ARGS are passed
# to `meson setup` on first use. Extra arguments go to `meson test`.
set -eu
cd "$(dirname "$0")/.."
B=${FP4S_BUILD:-build}
if [ ! -f "$B/build.ninja" ]; then
    # shellcheck disable=SC2086
    meson setup "$B" ${FP4S_MESON_ARGS:-}
fi
ninja -C "$B"
exec meson test -C "$B" --no-rebuild --print-errorlogs "$@"
