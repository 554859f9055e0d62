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
#  3. test_cuda by hand, alone on the GPU, with MALLOC_PERTURB_ set (the
#     variable meson sets), and, when staged, the same test with the GPU
#     sequence of before the fix ($FP4S_BEFORE, default
#     .device/before/test_cuda_before.c, compiled with the build's flags).
#  4. the same beside concurrent GPU work (test_cuda_decomp in a loop, the
#     PyTorch peers), several seeds and MALLOC_PERTURB_ values, and both with
#     --hold-default-stream (the default stream held during each check).
#  5. meson test of the GPU tests (cuda-gpu, cuda-gpu-hold, cuda-decomp-gpu),
#     twice over (--repeat 2), in parallel as meson runs them.
#  6. the whole default suite (meson test), then the conformance corpus with
#     its output.
#  7. tests/quant/peers/peers_torch.py quick (with a PyTorch that has
#     float8_e4m3fn; run from step 4 on, beside the rest, 4 CPU threads): the profiles against PyTorch
#     re-statements of torchao/TE/ModelOpt on the CPU and on CUDA, through
#     the helper library meson builds (BUILD/tests/quant/peers/libpeers.so).
# Every step has a time limit and the script a deadline (FP4S_DEADLINE
# seconds, default 235, the build included); FP4S_SUITE_ARGS: more meson test
# arguments for step 6 (e.g. --suite quant, to try the script quickly). Exit status 0 when the build,
# every run of the current test and the suite passed and the current S_enc
# code is right at every -O level; the before-the-fix runs are evidence, not
# part of the status.
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
# bg NAME LOG LIMIT CMD...: the same in the background; collect waits for all
bg_pids=() bg_names=() bg_logs=() bg_t0=()
bg() {
    local name=$1 log=$2 lim
    lim=$(lim_of "$3")
    shift 3
    if [ "$lim" -lt 5 ]; then row "$name" skipped 0 "(out of time)"; return 1; fi
    timeout -k 5 "$lim" "$@" > "$L/$log" 2>&1 &
    bg_pids+=($!) bg_names+=("$name") bg_logs+=("$log") bg_t0+=($SECONDS)
}
# collect: wait for the background runs; a failed run whose
# name starts with "before" is evidence and does not change the status
collect() {
    local i rc
    for i in "${!bg_pids[@]}"; do
        wait "${bg_pids[$i]}"
        rc=$?
        row "${bg_names[$i]}" "rc=$rc" $((SECONDS - bg_t0[i])) "$(result "$L/${bg_logs[$i]}" $rc)"
        case ${bg_names[$i]} in before*) ;; *) [ $rc = 0 ] || ok=0 ;; esac
    done
    bg_pids=() bg_names=() bg_logs=() bg_t0=()
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
TD=$B/tests/cuda/test_cuda_decomp
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

if [ $build_ok = 1 ]; then
    # 3. by hand, alone on the GPU, MALLOC_PERTURB_ set as meson sets it
    step "hand alone P=165 seed 101" hand-alone.log 60 env MALLOC_PERTURB_=165 "$T" --quiet --seed 101 || ok=0
    [ -n "$TB" ] && step "before alone P=165 seed 101" before-alone.log 60 \
        env MALLOC_PERTURB_=165 "$TB" --quiet --seed 101

    # 4. beside concurrent GPU work: the decomposition test in a loop, the
    # peers (PyTorch on CUDA), several seeds and MALLOC_PERTURB_ values
    stopf=$(mktemp)
    load_loop() {
        local n=0
        while [ -e "$stopf" ]; do
            "$TD" --quiet datasets/synth-tiny.h5 datasets/moe-h200.h5 > "$L/load-last.log" 2>&1
            local rc=$?
            echo "decomp run $n rc=$rc"; n=$((n + 1))
            [ $rc = 77 ] && break # no GPU: no load
        done
    }
    load_pid=
    if [ -x "$TD" ]; then
        load_loop > "$L/load.log" 2>&1 &
        load_pid=$!
    fi
    peers_pid=
    if [ -n "$PY" ] && "$PY" -c 'import torch; torch.float8_e4m3fn' 2>/dev/null; then
        peers_t0=$SECONDS
        # 4 CPU threads: it runs on beside the whole suite (step 6)
        OMP_NUM_THREADS=4 timeout -k 5 "$(lim_of 150)" "$PY" tests/quant/peers/peers_torch.py "$B/tests/quant/peers/libpeers.so" quick \
            > "$L/peers.log" 2>&1 &
        peers_pid=$!
    fi
    sleep 2
    for sp in "102 1" "103 165" "104 238" "105 85"; do
        set -- $sp
        bg "hand concurrent P=$2 seed $1" "hand-conc-$1.log" 60 env MALLOC_PERTURB_=$2 "$T" --quiet --seed "$1"
    done
    bg "hand --hold (profiles)" hand-hold.log 60 env MALLOC_PERTURB_=238 "$T" --quiet --seed 106 --profiles \
        --hold-default-stream
    if [ -n "$TB" ]; then
        bg "before concurrent P=165 seed 103" before-conc-103.log 60 env MALLOC_PERTURB_=165 "$TB" --quiet --seed 103
        bg "before concurrent P=238 seed 104" before-conc-104.log 60 env MALLOC_PERTURB_=238 "$TB" --quiet --seed 104
        # every check stalls 2 s or more: 20 s show it
        bg "before --hold (profiles)" before-hold.log 20 "$TB" --quiet --seed 106 --profiles --hold-default-stream
    fi
    collect

    # 5. the GPU tests inside meson, twice over, still beside the load
    step "meson GPU tests --repeat 2" meson-gpu.log 90 meson test -C "$B" --no-rebuild --print-errorlogs \
        --repeat 2 --num-processes "$(nproc)" cuda-gpu cuda-gpu-hold cuda-decomp-gpu || ok=0
    cp "$B/meson-logs/testlog.txt" "$L/testlog-gpu.txt" 2>/dev/null
    rm -f "$stopf"
    [ -n "$load_pid" ] && wait "$load_pid"
    row "concurrent load (decomp loop)" - - "$(grep -c 'rc=0' "$L/load.log" 2>/dev/null) runs rc=0, $(grep -vc 'rc=0' "$L/load.log" 2>/dev/null) not"
fi

# the peers' row (it runs in the background from step 4 on, through the suite)
peers_row() {
    [ -n "${peers_pid:-}" ] || return 0
    wait "$peers_pid"
    local prc=$?
    row "peers-torch (quick)" "rc=$prc" $((SECONDS - peers_t0)) \
        "$(grep -c '^OK' "$L/peers.log") OK, $(grep -c '^DIFF' "$L/peers.log") DIFF$(grep -m1 -E 'Error|error' "$L/peers.log" | cut -c1-60 | sed 's/^/; /')"
}

# 6. the whole default suite, and the corpus with its output
if [ $build_ok = 1 ]; then
    # shellcheck disable=SC2086
    step "whole suite (meson test)" meson-test.log 200 meson test -C "$B" --no-rebuild --print-errorlogs \
        --num-processes "$(nproc)" ${FP4S_SUITE_ARGS:-} || ok=0
    cp "$B/meson-logs/testlog.txt" "$L/testlog.txt" 2>/dev/null
    cp "$B/meson-logs/testlog.txt" "$OUT/testlog-suite.txt" 2>/dev/null
    [ -x "$B/tests/conformance/conformance" ] &&
        { step "conformance corpus" conformance.log 30 "$B/tests/conformance/conformance" tests/conformance/vectors.txt || ok=0; }
fi

peers_row
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$L"
{
    echo "toolchain_check: $(gcc --version | head -1); python $PY; $((SECONDS - T0)) s; status $([ $ok = 1 ] && echo PASS || echo FAIL)"
    tar -xzOf "$OUT/logs.tar.gz" logs/meson-test.log 2>/dev/null | grep -E "SKIP|FAIL|TIMEOUT" | grep -E "^ *[0-9]+/" | head -20
    tar -xzOf "$OUT/logs.tar.gz" logs/meson-gpu.log 2>/dev/null | grep -E " (FAIL|TIMEOUT) " | head -10
    tar -xzOf "$OUT/logs.tar.gz" logs/tscale_gcc13.log 2>/dev/null | grep -E "^== gcc|^old:" | paste - -
    tar -xzOf "$OUT/logs.tar.gz" logs/peers.log 2>/dev/null | grep -E "^(OK|DIFF)"
    echo "before*: the test with the GPU sequence of before the fix (evidence: expected to fail when concurrent or held)"
    printf '%-34s %-7s %5s  %s\n' step status time result
    printf '%s\n' "${summary[@]}"
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
[ $ok = 1 ]
