#!/bin/bash
# PTX instructions per element of the quantize kernels' per-group work (a
# proxy for the device's instruction count where no GPU or disassembler is at
# hand): small probe kernels that run exactly the functions of
# kernels/cuda/quant_block.cuh that the quantize kernels run on one group of
# 16 elements (block amax, then the fast element path with the block factor
# given), compiled like the kernels (nvcc -arch=sm_90 -O3 --fmad=false), and
# the instructions of each counted by opcode (loads, stores, moves and the
# return left out), divided by 16; the count includes the probe's own
# index arithmetic (about 12 instructions). Also ptxas's registers and spills
# of the real quantize kernels (kernels/cuda/quantize_{f32,bf16}.cu).
#
#   scripts/device/ptx_count.sh [BUILD_DIR]     (default: build)
#
# Not a measurement: the device runs SASS, where ptxas may fuse or split
# these (an abs or a negation becomes an operand modifier, a shift an
# integer multiply); the ncu part of scripts/device/cuda_check.sh counts the
# executed warp instructions.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cat > "$T/probe.cu" <<'CU'
#include "cuda/quant_block.cuh"
/* V: 0 float32 (the fast path, RNE, zero_in sign, MODE 0); 1 BF16 widened
 * to float32 first (the path before words); 2 BF16 MXFP4 packed
 * (cu_encode16_pk; RHA takes it too, with one more bit set in a LOP3);
 * 3 BF16 words, NVFP4 x * f (cu_encode16_nvw); 4, 5: as 1 and 3 with the
 * dividing element mode (MODE 1); 6: as 0 with ties away (RHA). */
template <int V>
__global__ void probe(fp4s_cu_params p, fp4s_cu_blk b, const uint4 *__restrict__ x, uint2 *__restrict__ out,
                      uint32_t *__restrict__ amo)
{
    constexpr int MODE = (V == 4 || V == 5) ? 1 : 0;
    const size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    uint32_t w[2];
    fp4s_cu_amax am = {0u, 0, 0};
    if (V == 0 || V == 6) {
        float f[16];
        for (int k = 0; k < 4; k++) {
            const uint4 v = x[4 * t + k];
            f[4 * k] = cu_float(v.x); f[4 * k + 1] = cu_float(v.y);
            f[4 * k + 2] = cu_float(v.z); f[4 * k + 3] = cu_float(v.w);
        }
        float a = 0.0f;
        for (int k = 0; k < 16; k++) a = cu_absmax_nan(a, f[k]);
        amo[t] = cu_bits(a);
        cu_encode16_fast<MODE, 4, V == 6 ? 2 : 0, 0>(p, b, 0.0f, f, w);
    } else {
        uint32_t u[8];
        for (int k = 0; k < 2; k++) {
            const uint4 v = x[2 * t + k];
            u[4 * k] = v.x; u[4 * k + 1] = v.y; u[4 * k + 2] = v.z; u[4 * k + 3] = v.w;
        }
        const float y = MODE == 1 ? cu_rcp(b.f) : 0.0f;
        if (V == 2) {
            amo[t] = cu_amax_w8(u);
            cu_encode16_pk<4, false>(p, b, u, w);
        } else if (V == 3 || V == 5) {
            amo[t] = cu_amax_w8(u);
            cu_encode16_nvw<MODE, 4, 0>(p, b, y, u, w);
        } else {
            float f[16];
            cu_widen16<CU_DT_BF16>(u, f);
            float a = 0.0f;
            for (int k = 0; k < 16; k++) a = cu_absmax_nan(a, f[k]);
            amo[t] = cu_bits(a);
            cu_encode16_fast<MODE, 4, 0, 0>(p, b, y, f, w);
        }
    }
    (void)am;
    out[t] = make_uint2(w[0], w[1]);
}
template __global__ void probe<0>(fp4s_cu_params, fp4s_cu_blk, const uint4 *, uint2 *, uint32_t *);
template __global__ void probe<1>(fp4s_cu_params, fp4s_cu_blk, const uint4 *, uint2 *, uint32_t *);
template __global__ void probe<2>(fp4s_cu_params, fp4s_cu_blk, const uint4 *, uint2 *, uint32_t *);
template __global__ void probe<3>(fp4s_cu_params, fp4s_cu_blk, const uint4 *, uint2 *, uint32_t *);
template __global__ void probe<4>(fp4s_cu_params, fp4s_cu_blk, const uint4 *, uint2 *, uint32_t *);
template __global__ void probe<5>(fp4s_cu_params, fp4s_cu_blk, const uint4 *, uint2 *, uint32_t *);
template __global__ void probe<6>(fp4s_cu_params, fp4s_cu_blk, const uint4 *, uint2 *, uint32_t *);
CU
FLAGS=(-arch=sm_90 -O3 -std=c++17 -Ilib/include -Ikernels -Ilib -I. -I"$B" --fmad=false)
nvcc "${FLAGS[@]}" -ptx "$T/probe.cu" -o "$T/probe.ptx"
python3 - "$T/probe.ptx" <<'PY'
import re, sys, collections
names = {0: "float32 (RNE, x*f)", 1: "BF16 widened first, x*f (before)", 2: "BF16 MXFP4 packed (after)",
         3: "BF16 words, NVFP4 x*f (after)", 4: "BF16 widened first, x/f (before)",
         5: "BF16 words, NVFP4 x/f (after)", 6: "float32 (RHA, x*f)"}
txt = open(sys.argv[1]).read()
for m in re.finditer(r"\.entry\s+(\S+?)\((.*?)\n\}", txt, re.S):
    v = int(re.search(r"probeILi(\d)E", m.group(1)).group(1))
    ops = collections.Counter()
    for line in m.group(2).splitlines():
        line = line.strip()
        if not line or line.startswith(("//", ".", "{", "}", "$")) or line.endswith(":"):
            continue
        op = line.split()[0].rstrip(";")
        if op.startswith("@"):
            op = line.split()[1]
        base = op.split(".")[0]
        if base in ("ld", "st", "ret", "cvta", "mov", ")"):
            continue
        ops[op] += 1
    n = sum(ops.values())
    # abs and neg of a float become operand modifiers in SASS
    mod = sum(c for k, c in ops.items() if k.split(".")[0] in ("abs", "neg"))
    print(f"probe {v}: {names[v]}: {n} PTX instructions (moves, loads, stores left out) for 16 elements"
          f" = {n/16:.2f} per element; {(n-mod)/16:.2f} without abs/neg")
    # integer/logic (ALU pipe on sm_90: LOP3, SHF, FMNMX, HMNMX2, VIMNMX, PRMT, ISETP, SEL), a
    # PTX and + or pair often one LOP3; shl may become IMAD.SHL (FMA pipe): counted apart
    alu = sum(c for k, c in ops.items() if k.split(".")[0] in
              ("and", "or", "xor", "not", "min", "max", "prmt", "shf", "shr", "selp", "setp", "lop3"))
    shl = sum(c for k, c in ops.items() if k.split(".")[0] == "shl")
    print(f"   integer/logic class {alu/16:.2f} per element, shifts left {shl/16:.2f}")
    print("   " + ", ".join(f"{k} {c}" for k, c in sorted(ops.items(), key=lambda kv: -kv[1])))
PY
echo "registers / spills of the quantize kernels (ptxas -v):"
for f in f32 bf16; do
    nvcc "${FLAGS[@]}" -Xptxas -v -c "kernels/cuda/quantize_$f.cu" -o "$T/q_$f.o" 2>&1 |
        grep -E "Compiling entry|registers|spill" | paste - - - |
        sed -E 's/.*quant16_kernelILi([0-9]+)ELi([0-9])ELi([0-9])ELi([0-9])ELb([01]).*Used ([0-9]+) registers.*/BS \1 MODE \2 DT \3 OUT \4 2D \5: \6 registers/;s/ptxas info *: //g' |
        sed -E 's/\t+/ /g' | sort -u
done
