#!/bin/bash
# One call on the GPU machine (Ubuntu 24.04: gcc 13.3, its own python3 with
# PyTorch and h5py; no GSL, Check, gnuplot or groff): shows that fp4scope
# builds and its whole default suite passes on that toolchain, and what gcc 13
# did to the old tensor-scale code. Logs and a summary go to $OUT.
#
#   scripts/device/toolchain_check.sh [PYTHON]
#
# 1. gcc 13 reproducer (scripts/device/tscale_gcc13.c) at -O0, -O2, -O2
#    -fno-tree-vrp and -O3: the old S_enc code against the current one.
# 2. meson setup with -Dgsl=disabled -Dgnuplot=disabled -Dpython=PYTHON
#    (default: python3 on PATH); Check is absent there, so its unit tests are
#    left out and every other test runs (cuda auto: the CUDA kernels and the
#    GPU tests when nvcc works). HDF5: a shim hdf5.pc when pkg-config only
#    knows hdf5-serial (Ubuntu).
# 3. the whole default suite (meson test), then the conformance corpus once
#    more with its output (it checks the CUDA kernels on the GPU too).
# 4. tests/quant/peers/peers_torch.py, quick (with a PyTorch that has
#    float8_e4m3fn): the profiles against PyTorch re-statements of
#    torchao/TE/ModelOpt on the CPU and on CUDA (torchao-cuda).
# Exit status 0 when the build and the suite passed and the current S_enc code
# is right at every -O level.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(pwd)/out}
mkdir -p "$OUT"
B=${FP4S_TOOLCHAIN_BUILD:-build-toolchain}
PY=${1:-$(command -v python3 || true)}
summary=()
ok=1
step() { # step NAME LOG CMD...
    local name=$1 log=$2
    shift 2
    local t0=$SECONDS
    "$@" > "$OUT/$log" 2>&1
    local rc=$?
    summary+=("$(printf '%-24s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" "$log")")
    return $rc
}

{ uname -a; cat /etc/os-release 2>/dev/null | head -2; gcc --version | head -1; meson --version; ninja --version
  echo "python: $PY"; [ -n "$PY" ] && "$PY" -c 'import sys, numpy, h5py; print(sys.version.split()[0], "numpy", numpy.__version__, "h5py", h5py.__version__)'
  [ -n "$PY" ] && "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
  command -v nvcc >/dev/null && nvcc --version | tail -1
  for p in check gsl jansson hdf5 hdf5-serial; do printf '%s: %s\n' "$p" "$(pkg-config --modversion "$p" 2>/dev/null || echo absent)"; done
  command -v gnuplot groff || true; } > "$OUT/toolchain.txt" 2>&1

# 1. the gcc 13 reproducer
repro() {
    for o in "-O0" "-O2" "-O2 -fno-tree-vrp" "-O3"; do
        echo "== gcc $o"
        # shellcheck disable=SC2086
        gcc $o -std=c11 -o "$OUT/tscale_gcc13" scripts/device/tscale_gcc13.c -lm && "$OUT/tscale_gcc13" || return 1
    done
}
step "gcc13-reproducer" tscale_gcc13.log repro || ok=0

# 2. configure and build
export PKG_CONFIG_PATH="$OUT/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
mkdir -p "$OUT/pkgconfig"
if ! pkg-config --exists hdf5 && pkg-config --exists hdf5-serial; then
    printf 'Name: hdf5\nDescription: serial HDF5 (shim: requires hdf5-serial)\nVersion: %s\nRequires: hdf5-serial\n' \
        "$(pkg-config --modversion hdf5-serial)" > "$OUT/pkgconfig/hdf5.pc"
fi
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
rm -rf "$B"
pyarg=()
[ -n "$PY" ] && pyarg=("-Dpython=$PY")
step "configure" configure.log meson setup "$B" -Dgsl=disabled -Dgnuplot=disabled "${pyarg[@]}" || ok=0
step "build" build.log ninja -C "$B" -j "$(nproc)" || ok=0

# 3. the whole default suite, and the corpus with its output
if [ $ok = 1 ]; then
    step "meson-test" meson-test.log meson test -C "$B" --no-rebuild --print-errorlogs --num-processes "$(nproc)" || ok=0
    cp "$B/meson-logs/testlog.txt" "$OUT/testlog.txt" 2>/dev/null
    step "conformance" conformance.log "$B/tests/conformance/conformance" tests/conformance/vectors.txt || ok=0
fi

# 4. the PyTorch peers (CPU and CUDA)
if [ -n "$PY" ] && "$PY" -c 'import torch; torch.float8_e4m3fn' 2>/dev/null; then
    step "peers-build" peers-build.log cc -O2 -shared -fPIC -std=c11 -D_GNU_SOURCE -Ilib/include -I. -Ilib -Ikernels \
        -I"$B" tests/quant/peers/peers_helper.c lib/core/*.c kernels/cpu/quant_ref.c kernels/cpu/dispatch.c \
        $(pkg-config --cflags --libs hdf5) -lm -lpthread -o "$OUT/libpeers.so" &&
        step "peers-torch" peers.log "$PY" tests/quant/peers/peers_torch.py "$OUT/libpeers.so" quick
fi

{
    echo "toolchain_check: $(gcc --version | head -1)"
    printf '%s\n' "${summary[@]}"
    grep -E "^(Ok|Fail|Skipped|Expected Fail|Unexpected Pass|Timeout):" "$OUT/meson-test.log" 2>/dev/null
    grep -E "SKIP|FAIL" "$OUT/meson-test.log" 2>/dev/null | grep -E "^ *[0-9]+/" | head -20
    grep -E "^== gcc|^old:" "$OUT/tscale_gcc13.log" 2>/dev/null | paste - - 
    grep -E "^(OK|DIFF)" "$OUT/peers.log" 2>/dev/null
} | tee "$OUT/summary.txt"
[ $ok = 1 ]
