#!/bin/bash
# The Python package on the GPU machine, in one device call (about 5 minutes,
# a deadline of FP4S_DEADLINE seconds, default 340):
#   1. scripts/device/setup.sh: the carried .debs, .device/env.sh, build-device
#      (CUDA on) with the fp4-* tools the tests compare with and bench/bench_cuda
#      (built in the background while step 2 runs);
#   2. pip install . (meson-python from the carried python3-mesonpy .deb, CUDA on:
#      the library and its kernels inside the package) into a fresh virtual
#      environment made with --system-site-packages from the machine's python3,
#      which also sees that python's own site-packages (its torch with CUDA:
#      a .pth file names them). Should the .debs be missing or pip fail, it
#      says so (PIP FAILED in the summary) and the rest runs on the source-tree
#      route instead (tools/python, build-device's libfp4scope.so), so that one
#      call still gives the GPU numbers;
#   3. the package's tests with FP4S_REQUIRE_CUDA=1 (a missing GPU fails them):
#      test_quant: CUDA tensors against the CPU bit for bit (quantize, packed
#      codes, dequantize, fake_quant, float32/bfloat16/float16, strided rows, a
#      side stream) for every profile the kernels implement, every profile
#      against fp4-quant; then, after the benchmarks, test_analysis (the
#      decomposition on the GPU against the CPU's), test_qat (the STE gradients
#      on CUDA), test_monitor (the monitor on a CUDA MoE against decompose() on
#      the CPU), test_tensorboard (the event files read back, TensorBoard's own
#      reader too where it is installed);
#   4. scripts/device/bench_py.py quant (2^30 elements, NVFP4 te and MXFP4 ocp,
#      float32 and bfloat16: the package against the same kernels called
#      directly) with bench/bench_cuda --only for the same profiles and size
#      beside it, and bench_py.py monitor (a ~105M-parameter MoE training step,
#      the monitor every 10 steps: overhead against no monitor);
#   5. bench_py.py compare: the package's quantize and fake_quant against the C
#      benchmark's kernels (target: within 10%) and the monitor's overhead
#      (target: under 2%), PASS or FAIL each.
#
# Through the device tool, from the repository root, with carry [".device"] and
# timeout_s 420:
#   bash scripts/device/py_check.sh
# .device/debs must hold setup.sh's Debian 12 .debs (jansson, GSL, Check,
# subunit) and, for meson-python, these three (architecture all):
#   (cd .device/debs && apt-get download python3-mesonpy python3-pyproject-metadata python3-packaging)
# Logs and the RESULT lines go to $OUT/py (a tarball py.tgz); the summary to
# standard output. Every step has a time limit and the script a deadline: a
# step that would start too late is skipped and says so. Exit status 0 when
# every step passed and every target was met, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
TOP=$(pwd)
T0=$SECONDS
DEADLINE=${FP4S_DEADLINE:-340}
X=${OUT:-/tmp/out}/py
mkdir -p "$X"
summary=()
bad=0
left() { echo $((DEADLINE - (SECONDS - T0))); }
step() { # step NAME LIMIT CMD...: run CMD with a time limit, output to $X/NAME.log
    local name=$1 lim=$2; shift 2
    if [ "$(left)" -lt 15 ]; then
        echo "py_check: $name skipped (deadline)"; summary+=("$name: SKIPPED (deadline)"); bad=1; return 1
    fi
    [ "$lim" -gt "$(left)" ] && lim=$(left)
    local t=$SECONDS
    timeout "$lim" "$@" > "$X/$name.log" 2>&1
    local rc=$?
    echo "py_check: $name rc=$rc ($((SECONDS - t)) s, at $((SECONDS - T0)) s)"
    summary+=("$name: rc=$rc in $((SECONDS - t)) s")
    [ "$rc" -eq 0 ] || bad=1
    return $rc
}
finish() {
    echo "== py_check summary ($((SECONDS - T0)) s; $(cat "$X/gpu.txt"))"
    printf '  %s\n' "${summary[@]}"
    (cd "${OUT:-/tmp/out}" && tar -czf py.tgz py)
    exit $bad
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$X/gpu.txt" 2>&1
echo "py_check: $(cat "$X/gpu.txt")"
pip_ok=1
for d in python3-mesonpy python3-pyproject-metadata python3-packaging; do
    if ! ls .device/debs/${d}_*.deb > /dev/null 2>&1; then
        echo "py_check: .device/debs lacks $d (apt-get download $d on Debian 12): no pip install" >&2
        pip_ok=0
    fi
done

# 1. the C build (environment, tools, bench_cuda)
B=build-device
step setup 120 scripts/device/setup.sh build.ninja || { tail -30 "$X/setup.log"; finish; }
. .device/env.sh
( ninja -C "$B" -j 8 tools/fp4-quant tools/fp4-decompose tools/fp4-channels tools/fp4-compare \
      tools/fp4-remedy tools/fp4-mismatch tools/fp4-capture tests/python/py_layout bench/bench_cuda \
      > "$X/tools_build.log" 2>&1; echo $? > "$X/tools_build.rc" ) &
tools_pid=$!

# 2. the package: meson-python from the .debs, a venv that sees the machine's torch
MP=$TOP/.device/mesonpy
V=/tmp/fp4s-venv
rm -rf "$MP" "$V" /tmp/fp4s-pybuild
if [ "$pip_ok" = 1 ]; then
    mkdir -p "$MP"
    for d in python3-mesonpy python3-pyproject-metadata python3-packaging; do dpkg -x .device/debs/${d}_*.deb "$MP"; done
    # the machine's python3 may lack ensurepip: then a venv without pip, and the
    # outer pip installs into it (pip --python)
    PIP=("$V/bin/python" -m pip)
    if ! python3 -m venv --system-site-packages "$V" > "$X/venv.log" 2>&1; then
        rm -rf "$V"
        python3 -m venv --system-site-packages --without-pip "$V" >> "$X/venv.log" 2>&1 || pip_ok=0
        PIP=(python3 -m pip --python "$V/bin/python")
    fi
fi
if [ "$pip_ok" = 1 ]; then
    python3 -c 'import site; print("\n".join(site.getsitepackages()))' \
        > "$("$V/bin/python" -c 'import site; print(site.getsitepackages()[0])')/device-python.pth"
    "$V/bin/python" -c 'import sys, torch; print("py_check: venv python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())'
    step pip_install 200 env PYTHONPATH="$MP/usr/lib/python3/dist-packages" "${PIP[@]}" install \
        --no-build-isolation --no-index --config-settings=builddir=/tmp/fp4s-pybuild \
        --config-settings=setup-args=-Dcuda=enabled . || { tail -30 "$X/pip_install.log"; pip_ok=0; }
fi
wait "$tools_pid"
trc=$(cat "$X/tools_build.rc")
echo "py_check: tools build rc=$trc at $((SECONDS - T0)) s"
summary+=("tools build: rc=$trc")
[ "$trc" = 0 ] || { tail -30 "$X/tools_build.log"; bad=1; finish; }
export FP4S_BUILDDIR=$TOP/$B FP4S_REQUIRE_CUDA=1 PYTHONPATH=$TOP/tests/python
if [ "$pip_ok" = 1 ]; then
    PYX=$V/bin/python
    unset FP4SCOPE_LIB
else
    # the source-tree route: the package from tools/python, build-device's library
    summary+=("PIP FAILED or not run: the tests and benchmarks below ran on the source-tree route")
    bad=1
    PYX=python3
    for lib in "$TOP/$B"/libfp4scope.so*; do break; done
    export PYTHONPATH=$TOP/tools/python:$TOP/tests/python FP4SCOPE_LIB=$lib
fi
(cd /tmp && "$PYX" -c 'import fp4scope, torch; print("py_check: fp4scope", fp4scope.__version__, fp4scope.lib_path(), "| torch", torch.__version__, "|", fp4scope.cuda_describe())')
"$PYX" -c 'import tensorboard; print("py_check: tensorboard", tensorboard.__version__, "(its reader checks the event files too)")' 2>/dev/null ||
    echo "py_check: no tensorboard package: the event files are read by tests/python/tfevents_reader.py only"

# 3, 4. the tests against the package, CUDA required; the benchmarks after test_quant
ptest() {
    (cd /tmp && step "test_$1" "$2" "$PYX" "$TOP/tests/python/test_$1.py")
    local rc=$?
    grep -E "^(ok|skip|FAIL)|failed," "$X/test_$1.log" | sed 's/^/    /'
    summary+=("test_$1: rc=$rc")
    [ "$rc" -eq 0 ] || bad=1
}
ptest binding 30
ptest quant 120
(cd /tmp && step bench_quant 90 "$PYX" "$TOP/scripts/device/bench_py.py" quant)
rc=$?; summary+=("bench_quant: rc=$rc"); [ "$rc" -eq 0 ] || bad=1
grep -E "^RESULT|bench_py" "$X/bench_quant.log"
step bench_cuda 60 "$B/bench/bench_cuda" --reps 9 --only nvfp4-te
grep -E "^RESULT " "$X/bench_cuda.log" | grep -E " nvfp4-te | amax " | head -12
step bench_cuda_ocp 60 "$B/bench/bench_cuda" --reps 9 --only "mxfp4-floor(ocp)"
grep -E "^RESULT " "$X/bench_cuda_ocp.log" | grep -v " amax " | head -12
(cd /tmp && step bench_monitor 150 "$PYX" "$TOP/scripts/device/bench_py.py" monitor --steps 100 --every 10)
rc=$?; summary+=("bench_monitor: rc=$rc"); [ "$rc" -eq 0 ] || bad=1
grep -E "^RESULT|bench_py|windows" "$X/bench_monitor.log"
ptest analysis 60
ptest qat 60
ptest monitor 90
ptest tensorboard 30

# 5. the package against the C benchmark, the monitor's overhead: the targets
echo "== the package against the C benchmark (bench/bench_cuda), the monitor's overhead"
"$PYX" "$TOP/scripts/device/bench_py.py" compare "$X/bench_quant.log" "$X/bench_monitor.log" \
    "$X/bench_cuda.log" "$X/bench_cuda_ocp.log" | tee "$X/compare.log"
rc=${PIPESTATUS[0]}
summary+=("targets (compare): rc=$rc")
[ "$rc" -eq 0 ] || bad=1
finish
