#!/bin/bash
# One call on the GPU machine: setup + build (scripts/device/setup.sh), the
# CUDA kernels against the C reference (tests/cuda), the benchmark against the
# device copy (bench/bench_cuda), fp4scope against torch.compile and eager
# PyTorch on the same tensors (scripts/device/bench_torch.py), an Nsight
# Compute pass (clocks left alone), compute-sanitizer memcheck and racecheck,
# the CPU scaling table (scripts/device/cpu_scaling.sh), and the decomposition
# on the GPU (part decomp, below); logs to $OUT.
#
#   scripts/device/cuda_check.sh [--parts LIST]
#
# LIST: comma-separated, run in this order: test, bench, ncu, torch, big,
# sanitizer, cpu, decomp, e2e, remedy, quant, ncu-decomp, rm-sanitizer
# (default: the first eight).
#
# e2e: scripts/device/e2e.sh: fp4-decompose, fp4-channels and fp4-quant with
# --device cuda and cpu on a FP4S_E2E_GIB GiB file (default 4) in the page
# cache, against the plain read of that file, and whether both devices print
# the same bytes.
#
# remedy: tests/cuda/test_cuda_remedy (rac's kernels bit for bit, the cuBLAS
# GEMMs within their K-term rounding bound and exact where every order is,
# fp4s_remedy_eval remedy by remedy; the GPU, and last the host emulation),
# then its --bench on one site (FP4S_RM_BENCH="M N K", default 4096 4096 4096): the
# evaluation on the CPU (all its threads, OpenBLAS) and through cuBLAS, time
# and agreement. quant: tests/cuda/test_cuda_qstats (the statistics kernel
# and fp4s_cuda_quantize_host_all against fp4s_quantize, bit for bit; the
# GPU, and last the host emulation) and scripts/device/quant_device.sh (fp4-quant
# --device cuda against cpu on a 1 GiB tensor: time, and the same summary,
# codes and scales). ncu-decomp: Nsight Compute on the decomposition
# kernels (bench_cuda_decomp on 0.25 GiB: speed of light, occupancy,
# registers, warp stalls). rm-sanitizer: compute-sanitizer memcheck and
# racecheck on the remedy and statistics kernels (--sanitize runs).
#
# decomp: tests/cuda/test_cuda_decomp (the GPU decomposition against the CPU
# decomposer bit for bit: host emulation, then the GPU on every implemented
# spec, grouping, input type and the shipped captures, then --big: 2^28
# elements), bench/bench_cuda_decomp (GPU vs CPU on one large synthetic
# tensor, FP4S_DECOMP_GIB GiB, default 10, and the device copy in the same
# run), and compute-sanitizer memcheck and racecheck on the decomposition
# kernels (test_cuda_decomp --sanitize). Alone (--parts decomp) it builds only
# what it runs, with the SIMD CPU kernels (the CPU side of the comparison is
# then what fp4-decompose runs). Every step has a time limit and the
# whole script a deadline (FP4S_DEADLINE seconds, default 225; a step that
# would start too late is skipped), so that it stays inside one device call. Run through the device tool with
# carry [".device"]. Prints a short summary last. Exit status: 0 when every
# step passed, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(pwd)/out}
mkdir -p "$OUT"
B=${FP4S_DEVICE_BUILD:-build-device}
export FP4S_DEVICE_BUILD=$B
parts=test,big,bench,torch,ncu,sanitizer,cpu,decomp
while [ $# -gt 0 ]; do
    case $1 in
    --parts) parts=$2; shift ;;
    *) echo "usage: cuda_check.sh [--parts test,big,bench,torch,ncu,sanitizer,cpu,decomp,e2e,remedy,quant,ncu-decomp,rm-sanitizer]" >&2; exit 2 ;;
    esac
    shift
done
want() { case ",$parts," in *",$1,"*) return 0 ;; esac; return 1; }
summary=()
T0=$SECONDS
DEADLINE=${FP4S_DEADLINE:-225} # seconds for the whole script (the device call's limit, less the packing)
step() { # step NAME LOGFILE LIMIT CMD...: run under a time limit, tee the log, record the status
    local name=$1 log=$2 lim=$3
    shift 3
    case ",${FP4S_SKIP:-}," in *",$name,"*)
        summary+=("$(printf '%-12s %-8s %4ss  %s' "$name" "skipped" 0 "(FP4S_SKIP)")")
        return 0 ;;
    esac
    local t0=$SECONDS left=$((DEADLINE - (SECONDS - T0) - 3))
    [ "$left" -lt "$lim" ] && lim=$left
    if [ "$lim" -le 5 ]; then
        summary+=("$(printf '%-12s %-8s %4ss  %s' "$name" "skipped" 0 "(out of time)")")
        return 1
    fi
    timeout "$lim" "$@" > >(tee "$OUT/$log") 2>&1
    local rc=$?
    sleep 0.2
    summary+=("$(printf '%-12s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" "$log")")
    return $rc
}

{ nvidia-smi; nvidia-smi -q -d CLOCK; } > "$OUT/nvidia-smi.txt" 2>&1
ok=1
# what each part runs, and only that is built (the CPU's SIMD kernels on:
# the CPU side of every comparison is then what the tools run; FP4S_MESON_ARGS
# adds meson options)
targets=
want test && targets="$targets tests/cuda/test_cuda"
want big && targets="$targets tests/cuda/test_cuda"
want sanitizer && targets="$targets tests/cuda/test_cuda"
want bench && targets="$targets bench/bench_cuda"
want ncu && targets="$targets bench/bench_cuda"
want torch && targets="$targets libfp4scope.so.$(sh scripts/version.sh)" # the file; libfp4scope.so is a link
want cpu && targets="$targets bench/bench_read"
want decomp && targets="$targets tests/cuda/test_cuda_decomp bench/bench_cuda_decomp"
want e2e && targets="$targets tools/fp4-decompose tools/fp4-channels tools/fp4-quant bench/bench_read"
want remedy && targets="$targets tests/cuda/test_cuda_remedy"
want rm-sanitizer && targets="$targets tests/cuda/test_cuda_remedy tests/cuda/test_cuda_qstats"
want quant && targets="$targets tests/cuda/test_cuda_qstats tools/fp4-quant bench/bench_read"
want ncu-decomp && targets="$targets bench/bench_cuda_decomp"
if ! step build build.log 200 scripts/device/setup.sh $targets; then
    ok=0
else
    . .device/env.sh
    if want cpu; then
        # the CPU table with the SIMD kernels, built in the background meanwhile
        # (meson directly: setup.sh would unpack .device/root again under the running steps)
        (rm -rf build-cpu && nice meson setup build-cpu -Dgnuplot=disabled -Dcuda=disabled &&
            nice ninja -C build-cpu -j "$(nproc)" tools/fp4-quant tools/fp4-decompose bench/bench_read) \
            > "$OUT/build_cpu.log" 2>&1 &
        cpu_build=$!
    fi
    if want test; then
        step test-emul test_emulate.log 60 "$B/tests/cuda/test_cuda" --emulate --quiet || ok=0
        step test-gpu test_gpu.log 90 "$B/tests/cuda/test_cuda" --quiet || ok=0
    fi
    want bench && { step bench bench_cuda.log 150 "$B/bench/bench_cuda" --reps ${FP4S_BENCH_REPS:-15} || ok=0; }
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
    if want ncu && [ -n "$NCU" ]; then
        # each quantize kernel of a few configurations on a 256 MiB float32 /
        # 128 MiB BF16 tensor (> L2): speed of light, memory and compute
        # workload (pipe use), DRAM bytes
        step ncu profile.log 120 "$NCU" --clock-control none --section SpeedOfLight \
            --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section WarpStateStats \
            --metrics dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum \
            --kernel-name regex:'quant16|quant2d|dequant16' \
            "$B/bench/bench_cuda" --rows 16384 --reps 1 --warmup 0 --only -floor || ok=0
        step ncu-nv profile_nv.log 120 "$NCU" --clock-control none --section SpeedOfLight \
            --section ComputeWorkloadAnalysis --section WarpStateStats \
            --metrics dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum \
            --kernel-name regex:'quant16|quant2d' \
            "$B/bench/bench_cuda" --rows 16384 --reps 1 --warmup 0 --only nvfp4-te || ok=0
    fi
    if want torch; then
        step torch bench_torch.log 150 env PYTHONUNBUFFERED=1 python3 scripts/device/bench_torch.py \
            "$B/libfp4scope.so" --reps ${FP4S_BENCH_REPS:-15} || ok=0
    fi
    want big && { step test-big test_gpu_big.log 120 "$B/tests/cuda/test_cuda" --big --quiet || ok=0; }
    if want sanitizer && command -v compute-sanitizer >/dev/null; then
        step memcheck memcheck.log 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
            "$B/tests/cuda/test_cuda" --profiles --quiet || ok=0
        step racecheck racecheck.log 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
            "$B/tests/cuda/test_cuda" --profiles --quiet || ok=0
    fi
    if want cpu; then
        wait "$cpu_build" || ok=0
        step cpu cpu_scaling.log 240 scripts/device/cpu_scaling.sh build-cpu || ok=0
    fi
    if want decomp; then
        # most wanted first: the deadline skips what comes too late
        caps=$(ls datasets/*.h5)
        step dc-gpu decomp_gpu.log 90 "$B/tests/cuda/test_cuda_decomp" --quiet $caps || ok=0
        step dc-bench decomp_bench.log 70 "$B/bench/bench_cuda_decomp" --gib "${FP4S_DECOMP_GIB:-10}" \
            --chan-gib 1 --reps 5 || ok=0
        if command -v compute-sanitizer >/dev/null; then
            step dc-memchk decomp_memcheck.log 30 compute-sanitizer --tool memcheck --error-exitcode 9 \
                "$B/tests/cuda/test_cuda_decomp" --sanitize --quiet || ok=0
            step dc-racechk decomp_racecheck.log 30 compute-sanitizer --tool racecheck --error-exitcode 9 \
                "$B/tests/cuda/test_cuda_decomp" --sanitize --quiet || ok=0
        fi
        step dc-big decomp_big.log 40 "$B/tests/cuda/test_cuda_decomp" --big --quiet || ok=0
        step dc-emul decomp_emulate.log 30 "$B/tests/cuda/test_cuda_decomp" --emulate --quiet $caps || ok=0
    fi
    want e2e && { step e2e e2e.log 240 scripts/device/e2e.sh "$B" || ok=0; }
    # the newer parts, most wanted first (the deadline skips what comes too late)
    want remedy && { step rm-gpu remedy_gpu.log 60 "$B/tests/cuda/test_cuda_remedy" --quiet || ok=0; }
    want quant && { step qs-gpu qstats_gpu.log 60 "$B/tests/cuda/test_cuda_qstats" --quiet || ok=0; }
    if want rm-sanitizer && command -v compute-sanitizer >/dev/null; then
        step rm-memchk remedy_memcheck.log 40 compute-sanitizer --tool memcheck --error-exitcode 9 \
            "$B/tests/cuda/test_cuda_remedy" --sanitize --quiet || ok=0
        step rm-racechk remedy_racecheck.log 40 compute-sanitizer --tool racecheck --error-exitcode 9 \
            "$B/tests/cuda/test_cuda_remedy" --sanitize --quiet || ok=0
        step qs-memchk qstats_memcheck.log 40 compute-sanitizer --tool memcheck --error-exitcode 9 \
            "$B/tests/cuda/test_cuda_qstats" --sanitize --quiet || ok=0
        step qs-racechk qstats_racecheck.log 40 compute-sanitizer --tool racecheck --error-exitcode 9 \
            "$B/tests/cuda/test_cuda_qstats" --sanitize --quiet || ok=0
    fi
    want quant && { step quant quant_device.log 90 scripts/device/quant_device.sh "$B" || ok=0; }
    # shellcheck disable=SC2086
    want remedy && { step rm-bench remedy_bench.log 90 "$B/tests/cuda/test_cuda_remedy" \
        --bench ${FP4S_RM_BENCH:-4096 4096 4096} --reps 2 --list "none,rac:0.25,rac:0.25:aug" || ok=0; }
    if want ncu-decomp && [ -n "$NCU" ]; then
        # the decomposition's kernels (quantize pass, row kernel, channel
        # kernel, the slot sums) on 0.25 GiB: what limits them, registers,
        # occupancy, stalls
        step ncu-dc profile_decomp.log 90 "$NCU" --clock-control none --section SpeedOfLight \
            --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
            --metrics dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum \
            --kernel-name regex:"${FP4S_NCU_DECOMP_KERNELS:-dk_|quant16}" --launch-count "${FP4S_NCU_DECOMP_COUNT:-16}" \
            "$B/bench/bench_cuda_decomp" --gib 0.25 --chan-gib 0.0625 --reps 1 --cpu-reps 1 || ok=0
    fi
    want remedy && { step rm-emul remedy_emulate.log 40 "$B/tests/cuda/test_cuda_remedy" --emulate --quiet || ok=0; }
    want quant && { step qs-emul qstats_emulate.log 40 "$B/tests/cuda/test_cuda_qstats" --emulate --quiet || ok=0; }
fi
tar -czf "$OUT/logs.tgz" -C "$OUT" --exclude logs.tgz . 2>/dev/null
# the summary on stdout and in summary.txt; then only logs.tgz and summary.txt
# stay under $OUT (the device tool brings back at most 8 files)
{
    echo "== cuda_check summary ($((SECONDS - T0)) s)"
    printf '%s\n' "${summary[@]}"
    grep -h "mismatches\|disagreements\|ERROR SUMMARY\|RACECHECK SUMMARY" "$OUT"/test_*.log "$OUT"/memcheck.log \
        "$OUT"/racecheck.log 2>/dev/null
    grep -H "checks,\|ERROR SUMMARY\|RACECHECK SUMMARY" "$OUT"/decomp_*.log 2>/dev/null | sed "s|^$OUT/||"
    [ -f "$OUT/decomp_bench.log" ] && grep "^bench_cuda_decomp:\|^device copy\|^fill\|^|" "$OUT/decomp_bench.log"
    [ -f "$OUT/bench_cuda.log" ] && grep "^RESULT" "$OUT/bench_cuda.log" | awk '{printf "%-10s %-8s %-5s %-24s %7.3f ms %7.0f GB/s %5.1f%%\n", $2, $3, $4, $5, $6, $7, 100*$8}'
    [ -f "$OUT/bench_torch.log" ] && grep "^|" "$OUT/bench_torch.log"
    [ -f "$OUT/cpu_scaling.log" ] && grep "^|" "$OUT/cpu_scaling.log"
    grep -H "checks,\|ERROR SUMMARY\|RACECHECK SUMMARY\|SKIP" "$OUT"/remedy_*.log "$OUT"/qstats_*.log 2>/dev/null | sed "s|^$OUT/||"
    [ -f "$OUT/remedy_bench.log" ] && grep "^bench:\|^|" "$OUT/remedy_bench.log"
    [ -f "$OUT/quant_device.log" ] && grep "^input:\|^|" "$OUT/quant_device.log"
    [ -f "$OUT/e2e.log" ] && grep "^gpu:\|^input:\|^plain\|^|" "$OUT/e2e.log"
    if [ -f "$OUT/profile_decomp.log" ]; then
        # per kernel: name, registers, achieved occupancy, SM and DRAM throughput
        grep -E "^  [a-z_].*\(|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|DRAM Throughput|Duration" \
            "$OUT/profile_decomp.log" | sed 's/  */ /g' | head -80
    fi
} | tee "$OUT/summary.txt"
find "$OUT" -maxdepth 1 -type f ! -name logs.tgz ! -name summary.txt -delete
[ $ok = 1 ]
