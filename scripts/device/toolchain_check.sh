#!/bin/bash
# One call on the GPU machine (Ubuntu 24.04: gcc 13.3, its own python3 with
# PyTorch and h5py; no GSL, Check, gnuplot or groff): shows that fp4scope
# builds and its whole default suite passes on that toolchain, that the CUDA
# kernel test (tests/cuda/test_cuda) passes in the conditions under which it
# once failed inside meson, and what gcc 13 did to the old tensor-scale code.
# Logs go to $OUT/logs.tar.gz, the summary to $OUT/summary.txt (table last).
#
#   scripts/device/toolchain_check.sh [--no-build] [PYTHON]
#
# PYTHON: the tests' python (-Dpython), default python3 on PATH; on the GPU
# machine /opt/torch/.venv/bin/python3. --no-build: use the existing build
# $FP4S_TOOLCHAIN_BUILD (default build-toolchain) as it is.
#
#  1. gcc 13 reproducer (scripts/device/tscale_gcc13.c) at -O0, -O2, -O2
#     -fno-tree-vrp and -O3: the old S_enc code against the current one.
#  2. build: scripts/device/setup.sh (the carried Check, jansson: every test)
#     with -Dgsl=disabled -Dpython=PYTHON, CUDA on; without .device/debs a
#     plain meson setup (then Check's unit tests and the tools are left out).
#  3. tests/quant/peers/peers_torch.py quick (with a PyTorch that has
#     float8_e4m3fn), in the background from here to the end, 4 CPU threads:
#     the profiles against PyTorch re-statements of torchao/TE/ModelOpt/
#     microxcaling on the CPU and on CUDA, through the helper library meson
#     builds (BUILD/tests/quant/peers/libpeers.so); its row comes last.
#  4. when staged, the test with the GPU sequence of before the fix
#     ($FP4S_BEFORE, default .device/before/test_cuda_before.c, compiled
#     with the build's flags) with --hold-default-stream: evidence that the
#     held test fails on that sequence (expected to fail; not in the status).
#  5. meson test --suite cuda --no-suite slow (cuda-gpu, cuda-gpu-hold,
#     cuda-decomp-gpu and the CPU emulations) twice over (--repeat 2), in
#     parallel as meson runs them, beside the peers.
#  6. meson test --no-suite cuda (with step 5: the whole default suite), then
#     the conformance corpus with its output.
# Every step has a time limit and the script a deadline (FP4S_DEADLINE
# seconds, default 235, the build included); FP4S_SUITE_ARGS: more meson test
# arguments for step 6 (e.g. --suite quant, to try the script quickly). Exit
# status 0 when the build, steps 5 and 6 and the conformance corpus passed and
# the current S_enc code is right at every -O level; the before-the-fix run
# and the peers are evidence, not part of the status.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 5
TOP=$(pwd)
OUT=${OUT:-$TOP/out}
L=$OUT/logs
mkdir -p "$L"
B=${FP4S_TOOLCHAIN_BUILD:-build-toolchain}
BEFORE=${FP4S_BEFORE:-.device/before/test_cuda_before.c}
export L B BEFORE
DEADLINE=${FP4S_DEADLINE:-235}
T0=$SECONDS
build=1
if [ "${1:-}" = --no-build ]; then build=0; shift; fi
PY=${1:-$(command -v python3 || true)}
summary=()
ok=1

# result LOG RC: one line about what a run printed
result() {
    local log=$1 rc=$2 s w p
    s=$(grep -E "^test_cuda(_decomp)?: .*(comparisons|checks)" "$log" | tail -1 | sed 's/^test_cuda[_a-z]*: //')
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && s="timed out${s:+; $s}"
    if grep -q "^test_cuda" "$log"; then
        w=$(grep -c "waited for the default stream" "$log")
        p=$(grep -c "cuda 0xee" "$log")
        [ "$w" != 0 ] && s="$s; $w checks waited for the default stream"
        [ "$p" != 0 ] && s="$s; $p lines show poison 0xee"
        grep -q "SKIP" "$log" && s="$s (SKIP)"
        echo "$s"
        return
    fi
    [ -n "$s" ] && { echo "$s"; return; }
    s=$(grep -E "^(Ok|Fail|Skipped|Timeout): " "$log" | tr -s ' ' | paste -sd ' ')
    if [ -n "$s" ]; then echo "$s"; return; fi
    s=$(grep -E "SKIP|FAIL|error:|Error" "$log" | head -1)
    [ -n "$s" ] || s=$(grep . "$log" | tail -1)
    printf '%s\n' "$s" | cut -c1-90
}
row() { summary+=("$(printf '%-34s %-7s %4ss  %s' "$1" "$2" "$3" "$4")"); }
lim_of() { # lim_of WANTED: WANTED, or less before the deadline (0: no time)
    local l=$((DEADLINE - (SECONDS - T0) - 4))
    [ "$l" -lt "$1" ] && echo $((l > 0 ? l : 0)) || echo "$1"
}
# step NAME LOG LIMIT CMD...: a foreground run under a time limit
step() {
    local name=$1 log=$2 lim
    lim=$(lim_of "$3")
    shift 3
    if [ "$lim" -lt 5 ]; then row "$name" skipped 0 "(out of time)"; return 1; fi
    local t0=$SECONDS
    if [ "$(type -t "$1")" = function ]; then # a function of this script: in a bash of its own
        timeout -k 5 "$lim" bash -c "$(declare -f "$1"); $(printf '%q ' "$@")" > "$L/$log" 2>&1
    else
        timeout -k 5 "$lim" "$@" > "$L/$log" 2>&1
    fi
    local rc=$?
    row "$name" "rc=$rc" $((SECONDS - t0)) "$(result "$L/$log" $rc)"
    return $rc
}
{ uname -a; head -2 /etc/os-release 2>/dev/null; gcc --version | head -1; meson --version; ninja --version
  echo "python: $PY"; [ -n "$PY" ] && "$PY" -c 'import sys, numpy, h5py; print(sys.version.split()[0], "numpy", numpy.__version__, "h5py", h5py.__version__)'
  [ -n "$PY" ] && "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
  command -v nvcc >/dev/null && nvcc --version | tail -1
  nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv 2>/dev/null
  for p in check gsl jansson hdf5 hdf5-serial; do printf '%s: %s\n' "$p" "$(pkg-config --modversion "$p" 2>/dev/null || echo absent)"; done
  command -v gnuplot groff || true; } > "$L/toolchain.txt" 2>&1

# 1. the gcc 13 reproducer
repro() {
    for o in "-O0" "-O2" "-O2 -fno-tree-vrp" "-O3"; do
        echo "== gcc $o"
        # shellcheck disable=SC2086
        gcc $o -std=c11 -o "$L/tscale_gcc13" scripts/device/tscale_gcc13.c -lm && "$L/tscale_gcc13" || return 1
    done
}
step "gcc13-reproducer" tscale_gcc13.log 20 repro || ok=0
rm -f "$L/tscale_gcc13"

# 2. configure and build (one build, everything)
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
export margs="-Dgsl=disabled${PY:+ -Dpython=$PY}"
plain_setup() {
    export PKG_CONFIG_PATH="$L/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    mkdir -p "$L/pkgconfig"
    if ! pkg-config --exists hdf5 && pkg-config --exists hdf5-serial; then
        printf 'Name: hdf5\nDescription: serial HDF5 (shim: requires hdf5-serial)\nVersion: %s\nRequires: hdf5-serial\n' \
            "$(pkg-config --modversion hdf5-serial)" > "$L/pkgconfig/hdf5.pc"
    fi
    rm -rf "$B"
    # shellcheck disable=SC2086
    meson setup "$B" -Dgnuplot=disabled $margs && ninja -C "$B" -j "$(nproc)"
}
build_ok=1
if [ $build = 1 ]; then
    if ls .device/debs/*.deb >/dev/null 2>&1; then
        export FP4S_DEVICE_BUILD=$B FP4S_MESON_ARGS="$margs"
        step "build (setup.sh)" build.log 150 scripts/device/setup.sh || build_ok=0
    else
        step "build (plain meson)" build.log 150 plain_setup || build_ok=0
    fi
fi
[ -f .device/env.sh ] && . .device/env.sh
T=$B/tests/cuda/test_cuda
[ -x "$T" ] || build_ok=0
[ $build_ok = 1 ] || ok=0

# the test with the GPU sequence of before the fix, with the build's own
# compile and link commands (staged beside the tree, never committed)
TB=
build_before() {
    local src cc_cmd ld_cmd
    src=$(readlink -f "$BEFORE")
    cd "$B" || return 1
    cc_cmd=$(ninja -t commands tests/cuda/test_cuda | grep -F 'test_cuda.p/test_cuda.c.o' | grep -F -- ' -c ' | tail -1)
    ld_cmd=$(ninja -t commands tests/cuda/test_cuda | tail -1)
    [ -n "$cc_cmd" ] && [ -n "$ld_cmd" ] || return 1
    cc_cmd=$(printf '%s' "$cc_cmd" | sed -e 's|tests/cuda/test_cuda\.p/test_cuda\.c\.o|tests/cuda/test_cuda_before.o|g' \
                                         -e "s|[^ ]*tests/cuda/test_cuda\.c\$|$src|")
    ld_cmd=$(printf '%s' "$ld_cmd" | sed -e 's|tests/cuda/test_cuda\.p/test_cuda\.c\.o|tests/cuda/test_cuda_before.o|' \
                                         -e 's|-o tests/cuda/test_cuda |-o tests/cuda/test_cuda_before |')
    echo "$cc_cmd"; eval "$cc_cmd" || return 1
    echo "$ld_cmd"; eval "$ld_cmd" || return 1
    echo "built $B/tests/cuda/test_cuda_before from $BEFORE"
}
if [ $build_ok = 1 ] && [ -f "$BEFORE" ]; then
    step "before-fix test: build" before-build.log 40 build_before && TB=$B/tests/cuda/test_cuda_before
fi

# 3. the PyTorch peers, in the background from here to the end (4 CPU
# threads; their row comes last and does not change the status)
peers_pid=
if [ $build_ok = 1 ] && [ -n "$PY" ] && "$PY" -c 'import torch; torch.float8_e4m3fn' 2>/dev/null; then
    peers_t0=$SECONDS
    OMP_NUM_THREADS=4 timeout -k 5 "$(lim_of 230)" "$PY" tests/quant/peers/peers_torch.py \
        "$B/tests/quant/peers/libpeers.so" quick > "$L/peers.log" 2>&1 &
    peers_pid=$!
fi

if [ $build_ok = 1 ]; then
    # 4. evidence: the test with the GPU sequence of before the fix, the
    # default stream held (after its pass without the hold, each check stalls
    # 2 s: 15 s show it)
    [ -n "$TB" ] && step "before --hold (profiles)" before-hold.log 15 \
        "$TB" --quiet --seed 106 --profiles --hold-default-stream

    # 5. the CUDA suite inside meson (cuda-gpu, cuda-gpu-hold,
    # cuda-decomp-gpu and the emulations), twice over, in parallel as meson
    # runs them
    step "meson cuda suite --repeat 2" meson-gpu.log 90 meson test -C "$B" --no-rebuild --print-errorlogs \
        --repeat 2 --num-processes "$(nproc)" --suite cuda --no-suite slow || ok=0
    cp "$B/meson-logs/testlog.txt" "$L/testlog-gpu.txt" 2>/dev/null

    # 6. the rest of the default suite (with step 5: the whole of it), then
    # the conformance corpus with its output
    # shellcheck disable=SC2086
    step "suite --no-suite cuda" meson-test.log 150 meson test -C "$B" --no-rebuild \
        --print-errorlogs --num-processes "$(nproc)" --no-suite cuda ${FP4S_SUITE_ARGS:-} || ok=0
    cp "$B/meson-logs/testlog.txt" "$L/testlog.txt" 2>/dev/null
    cp "$B/meson-logs/testlog.txt" "$OUT/testlog-suite.txt" 2>/dev/null
    [ -x "$B/tests/conformance/conformance" ] &&
        { step "conformance corpus" conformance.log 20 "$B/tests/conformance/conformance" tests/conformance/vectors.txt || ok=0; }
fi

# the peers' row
if [ -n "$peers_pid" ]; then
    wait "$peers_pid"
    prc=$?
    row "peers-torch (quick)" "rc=$prc" $((SECONDS - peers_t0)) \
        "$(grep -c '^OK' "$L/peers.log") OK, $(grep -c '^DIFF' "$L/peers.log") DIFF$(grep -m1 -E 'Error|error' "$L/peers.log" | cut -c1-60 | sed 's/^/; /')"
fi
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$L"
{
    echo "toolchain_check: $(gcc --version | head -1); python $PY; $((SECONDS - T0)) s; status $([ $ok = 1 ] && echo PASS || echo FAIL)"
    tar -xzOf "$OUT/logs.tar.gz" logs/meson-test.log 2>/dev/null | grep -E "SKIP|FAIL|TIMEOUT" | grep -E "^ *[0-9]+/" | head -20
    tar -xzOf "$OUT/logs.tar.gz" logs/meson-gpu.log 2>/dev/null | grep -E " (FAIL|TIMEOUT) " | head -10
    tar -xzOf "$OUT/logs.tar.gz" logs/tscale_gcc13.log 2>/dev/null | grep -E "^== gcc|^old:" | paste - -
    tar -xzOf "$OUT/logs.tar.gz" logs/peers.log 2>/dev/null | grep -E "^(OK|DIFF)"
    echo "before*: the test with the GPU sequence of before the fix (evidence: expected to fail when held)"
    printf '%-34s %-7s %5s  %s\n' step status time result
    printf '%s\n' "${summary[@]}"
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
[ $ok = 1 ]
