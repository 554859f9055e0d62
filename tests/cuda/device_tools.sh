#!/bin/sh
# --device on every tool: `list` (the capability report, exit 0), a bad name
# (exit 2), cuda on a tool without a GPU path (exit 2, "has no GPU path"),
# auto (runs, silently on the CPU where the GPU cannot), and on the tools
# with a GPU path: fp4-quant's outputs and JSON summary the same bytes on
# either device, fp4-remedy's channels and non-GEMM errors the same, cuda
# refused with exit 2 and the reason where the GPU cannot run. --version
# lists cuda only for the tools that use it (and only when built in).
set -eu
. "${FP4S_SRCDIR:?}/tests/python.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

expect() { # expect CODE STDERR-PATTERN CMD...
    code=$1; pat=$2; shift 2
    set +e
    "$@" >out.txt 2>err.txt
    rc=$?
    set -e
    [ "$rc" -eq "$code" ] || fail "$*: exit $rc, expected $code ($(head -c 300 err.txt))"
    if [ -n "$pat" ]; then
        grep -q -- "$pat" err.txt || fail "$*: stderr lacks '$pat': $(head -c 300 err.txt)"
    fi
}

"$PY" - <<'EOF'
import numpy as np
rng = np.random.default_rng(3)
x = (rng.standard_normal((64, 256)) * np.exp(rng.standard_normal(256))).astype(np.float32)
x[3, 7] = np.nan; x[9, 100] = np.inf; x[10, 0:32] = 0; x[11, 32:64] = 1e-42
np.save("x.npy", x)
np.save("a.npy", (rng.standard_normal((48, 128)) * np.exp(rng.standard_normal(128))).astype(np.float32))
np.save("w.npy", (0.02 * rng.standard_normal((40, 128))).astype(np.float32))
EOF

cuda_built=0
fp4-quant --device list >list.txt || fail "fp4-quant --device list: exit $?"
grep -q "^cuda: built in" list.txt && cuda_built=1
gpu=0
grep -q "^fp4-quant *gpu:" list.txt && gpu=1
for t in fp4-decompose fp4-channels fp4-quant fp4-remedy; do
    grep -q "^$t " list.txt || fail "--device list does not name $t"
done
grep -q "^other tools" list.txt || fail "--device list: no line for the tools without a GPU path"

# each tool (a tool with subcommands through one of them)
for inv in "fp4-capture ls" fp4-channels fp4-compare fp4-decompose fp4-mismatch "fp4-plot mismatch" fp4-quant \
    fp4-remedy fp4-report fp4-rl; do
    t=${inv%% *}
    # shellcheck disable=SC2086
    expect 0 "" $inv --device list
    cmp -s out.txt list.txt || fail "$inv --device list differs from fp4-quant's"
    # shellcheck disable=SC2086
    expect 2 "device 'gpu': expected cpu, cuda or auto" $inv --device gpu
    # shellcheck disable=SC2086
    expect 0 "" $inv --device auto --version
    expect 0 "" $t --version
    case $t in
    fp4-channels | fp4-decompose | fp4-quant | fp4-remedy)
        if [ "$cuda_built" -eq 1 ]; then
            grep -q "^features:.* cuda" out.txt || fail "$t --version: no cuda feature"
            grep -q "^gpu: " out.txt || fail "$t --version: no gpu line"
        fi ;;
    *)
        grep -q "^features:.* cuda" out.txt && fail "$t --version lists cuda (it has no GPU path)"
        grep -q "^gpu: " out.txt && fail "$t --version has a gpu line"
        # shellcheck disable=SC2086
        expect 2 "--device cuda: $t has no GPU path" $inv --device cuda --version ;;
    esac
done
for sub in import merge synth; do expect 2 "has no GPU path" fp4-capture $sub --device cuda x.npy; done

# fp4-quant: the same bytes on either device (the outputs under the same
# names, so that the summaries, which name them, compare)
run_quant() { # run_quant DEV TAG ARGS...: the outputs to c/s/d_TAG.npy, the summary to TAG.json
    d=$1; tag=$2; shift 2
    set +e
    fp4-quant "$@" --json --device "$d" --codes c.npy --scales s.npy --dequant d.npy x.npy >out.txt 2>err.txt
    rc=$?
    set -e
    cp out.txt "$tag.json"
    for f in c s d; do [ -e $f.npy ] && mv $f.npy "${f}_$tag.npy"; done
    return 0
}
for p in "-f mxfp4" "-f nvfp4" "-f nvfp4 -p te --2d" "-f mxfp4 -p ggml" "-f nvfp4 -p modelopt"; do
    rm -f ./*_cpu.npy ./*_auto.npy ./*_gpu.npy
    # shellcheck disable=SC2086
    run_quant cpu cpu $p
    [ "$rc" -eq 0 ] || fail "fp4-quant $p: exit $rc: $(cat err.txt)"
    # shellcheck disable=SC2086
    run_quant auto auto $p
    [ "$rc" -eq 0 ] || fail "fp4-quant $p --device auto: exit $rc: $(cat err.txt)"
    cmp -s cpu.json auto.json || fail "fp4-quant $p --device auto: summary differs"
    for f in c s d; do cmp -s ${f}_cpu.npy ${f}_auto.npy || fail "fp4-quant $p --device auto: $f differs"; done
    # shellcheck disable=SC2086
    run_quant cuda gpu $p
    if [ "$gpu" -eq 1 ]; then
        [ "$rc" -eq 0 ] || fail "fp4-quant $p --device cuda: exit $rc: $(cat err.txt)"
        cmp -s cpu.json gpu.json || fail "fp4-quant $p --device cuda: summary differs from the CPU's"
        for f in c s d; do cmp -s ${f}_cpu.npy ${f}_gpu.npy || fail "fp4-quant $p --device cuda: $f differs"; done
    else
        [ "$rc" -eq 2 ] || fail "fp4-quant --device cuda without a GPU: exit $rc, expected 2"
        grep -q -- "--device cuda: " err.txt || fail "fp4-quant --device cuda: no reason: $(cat err.txt)"
        [ ! -e c_gpu.npy ] || fail "fp4-quant --device cuda refused but wrote an output"
    fi
done
# a quantizer the kernels do not implement: auto stays on the CPU, cuda is refused (where a GPU is)
expect 0 "" fp4-quant -f fp8 --json --device auto x.npy
if [ "$gpu" -eq 1 ]; then expect 2 "--device cuda: " fp4-quant -f fp8 --device cuda x.npy; fi

# fp4-remedy: the channels and the errors without a GEMM are the same bits
# (the errors from the GEMMs agree to their rounding bound: test_cuda_remedy)
rem="none,rac:0.25,rac:0.25:aug,rac-rand:0.2,mbs:128"
expect 0 "" fp4-remedy --json --act a.npy --weight w.npy --remedy "$rem"
cp out.txt rcpu.json
for dev in auto cuda; do
    set +e
    fp4-remedy --json --device $dev --act a.npy --weight w.npy --remedy "$rem" >out.txt 2>err.txt
    rc=$?
    set -e
    if [ "$rc" -ne 0 ]; then
        if [ "$dev" = cuda ] && [ "$rc" -eq 2 ] && grep -q -- "--device cuda: " err.txt; then continue; fi
        fail "fp4-remedy --device $dev: exit $rc: $(cat err.txt)"
        continue
    fi
    "$PY" - rcpu.json out.txt <<'EOF' || fail "fp4-remedy --device $dev: a bit-identical field differs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
ra, rb = a["results"] if isinstance(a, dict) else a, b["results"] if isinstance(b, dict) else b
assert len(ra) == len(rb)
for x, y in zip(ra, rb):
    for k in ("remedy", "rac_set", "act_rel_error", "weight_rel_error", "dz_left", "rest_left", "act_before",
              "act_after"):
        if k in x:
            assert x[k] == y[k], (x["remedy"], k, x[k], y[k])
EOF
done
[ "$fails" -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "device_tools: all checks passed"
