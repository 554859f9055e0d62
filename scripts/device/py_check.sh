#!/bin/bash
# The Python package on the GPU machine, in one device call (about 4 minutes):
#   1. scripts/device/setup.sh: the carried .debs, .device/env.sh, build-device
#      (CUDA on) with the fp4-* tools the tests compare with and bench/bench_cuda
#      (built in the background while step 2 runs);
#   2. pip install . (meson-python from the carried python3-mesonpy .deb, CUDA on:
#      the library and its kernels inside the package) into a fresh virtual
#      environment made with --system-site-packages from the machine's python3,
#      which also sees that python's own site-packages (its torch with CUDA:
#      a .pth file names them);
#   3. the package's tests with FP4S_REQUIRE_CUDA=1 (a missing GPU fails them):
#      CUDA tensors against the CPU bit for bit (quantize, packed codes,
#      dequantize, fake_quant, float32/bfloat16/float16, strided rows, a side
#      stream) for every profile the kernels implement, every profile against
#      fp4-quant, the decomposition on the GPU against the CPU's, the STE
#      gradients on CUDA, the monitor on a CUDA MoE against decompose() on the
#      CPU, the event files read back (TensorBoard's own reader too where it is
#      installed);
#   4. scripts/device/bench_py.py quant (2^30 elements, NVFP4 te and MXFP4 ocp,
#      float32 and bfloat16: the package against the same kernels called
#      directly) with bench/bench_cuda --only for the same profiles and size
#      beside it, and bench_py.py monitor (a ~105M-parameter MoE training step,
#      the monitor every 10 steps: overhead against no monitor).
#
# Through the device tool, from the repository root, with carry [".device"]:
#   FP4S_DEADLINE=280 bash scripts/device/py_check.sh
# .device/debs must hold setup.sh's Debian 12 .debs (jansson, GSL, Check,
# subunit) and, for meson-python, these three (architecture all):
#   (cd .device/debs && apt-get download python3-mesonpy python3-pyproject-metadata python3-packaging)
# Logs and the RESULT lines go to $OUT/py (a tarball py.tgz); the summary to
# standard output. Every step has a time limit and the script a deadline
# (FP4S_DEADLINE seconds, default 280): a step that would start too late is
# skipped and says so.
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
T0=$SECONDS
DEADLINE=${FP4S_DEADLINE:-280}
X=${OUT:-/tmp/out}/py
mkdir -p "$X"
left() { echo $((DEADLINE - (SECONDS - T0))); }
step() { # step NAME LIMIT CMD...: run CMD with a time limit, output to $X/NAME.log
    local name=$1 lim=$2; shift 2
    if [ "$(left)" -lt 15 ]; then echo "py_check: $name skipped (deadline)"; return 1; fi
    [ "$lim" -gt "$(left)" ] && lim=$(left)
    timeout "$lim" "$@" > "$X/$name.log" 2>&1
    local rc=$?
    echo "py_check: $name rc=$rc at $((SECONDS - T0)) s"
    return $rc
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$X/gpu.txt" 2>&1
echo "py_check: $(cat "$X/gpu.txt")"
for d in python3-mesonpy python3-pyproject-metadata python3-packaging; do
    if ! ls .device/debs/${d}_*.deb > /dev/null 2>&1; then
        echo "py_check: .device/debs lacks $d (apt-get download $d on Debian 12)" >&2
        exit 3
    fi
done

# 1. the C build (environment, tools, bench_cuda)
B=build-device
step setup 120 scripts/device/setup.sh build.ninja || { tail -30 "$X/setup.log"; exit 1; }
. .device/env.sh
( ninja -C "$B" -j 8 tools/fp4-quant tools/fp4-decompose tools/fp4-channels tools/fp4-compare \
      tools/fp4-remedy tools/fp4-mismatch tools/fp4-capture tests/python/py_layout bench/bench_cuda \
      > "$X/tools_build.log" 2>&1; echo $? > "$X/tools_build.rc" ) &
tools_pid=$!

# 2. the package: meson-python from the .debs, a venv that sees the machine's torch
MP=$TOP/.device/mesonpy
rm -rf "$MP"
mkdir -p "$MP"
for d in python3-mesonpy python3-pyproject-metadata python3-packaging; do dpkg -x .device/debs/${d}_*.deb "$MP"; done
V=/tmp/fp4s-venv
rm -rf "$V" /tmp/fp4s-pybuild
python3 -m venv --system-site-packages "$V"
python3 -c 'import site; print("\n".join(site.getsitepackages()))' > "$("$V/bin/python" -c 'import site; print(site.getsitepackages()[0])')/device-python.pth"
"$V/bin/python" -c 'import torch; print("py_check: venv python", __import__("sys").version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())'
step pip_install 200 env PYTHONPATH="$MP/usr/lib/python3/dist-packages" "$V/bin/python" -m pip install \
    --no-build-isolation --no-index --config-settings=builddir=/tmp/fp4s-pybuild --config-settings=setup-args=-Dcuda=enabled . ||
    { tail -40 "$X/pip_install.log"; exit 1; }
(cd /tmp && "$V/bin/python" -c 'import fp4scope; print("py_check: fp4scope", fp4scope.__version__, fp4scope.lib_path(), "|", fp4scope.cuda_describe())')
wait "$tools_pid"
echo "py_check: tools build rc=$(cat "$X/tools_build.rc") at $((SECONDS - T0)) s"

# 3. the tests against the installed package, CUDA required
export FP4S_BUILDDIR=$TOP/$B FP4S_REQUIRE_CUDA=1 PYTHONPATH=$TOP/tests/python
unset FP4SCOPE_LIB
for t in binding quant analysis qat monitor tensorboard; do
    (cd /tmp && step "test_$t" 120 "$V/bin/python" "$TOP/tests/python/test_$t.py")
    grep -E "^(ok|skip|FAIL)|failed," "$X/test_$t.log" | sed 's/^/    /'
done

# 4. the benchmarks
(cd /tmp && step bench_quant 90 "$V/bin/python" "$TOP/scripts/device/bench_py.py" quant)
grep -E "^RESULT|bench_py" "$X/bench_quant.log"
step bench_cuda 60 "$B/bench/bench_cuda" --reps 9 --only nvfp4-te
grep -E "^RESULT " "$X/bench_cuda.log" | grep -E " nvfp4-te " | head -12
step bench_cuda_ocp 60 "$B/bench/bench_cuda" --reps 9 --only "mxfp4-floor(ocp)"
grep -E "^RESULT " "$X/bench_cuda_ocp.log" | head -12
(cd /tmp && step bench_monitor 150 "$V/bin/python" "$TOP/scripts/device/bench_py.py" monitor --steps 100 --every 10)
grep -E "^RESULT|bench_py|windows" "$X/bench_monitor.log"
cd "${OUT:-/tmp/out}" && tar -czf py.tgz py
echo "py_check done in $((SECONDS - T0)) s"
