#!/bin/sh
# fp4-ckpt refuses malformed checkpoints and configs with exit status 3, a
# message naming the file, the tensor (or config entry) and the problem, and
# writes nothing.
. "$(dirname "$0")/../capture/common.sh"
cd "$T"
"$PY" "$SRC/tests/ckpt/make_ckpt.py" "$T/good" >/dev/null
# one broken checkpoint per case, from a ModelOpt q_proj
"$PY" - <<'EOF'
import json, os, struct, sys
sys.path.insert(0, os.path.join(os.environ["FP4S_SRCDIR"], "tests", "ckpt"))
import numpy as np
from make_ckpt import modelopt_nvfp4, t_f32, t_u8, write_st, bf16
w = bf16(np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32))[1]
q, sb, s2, _ = modelopt_nvfp4(w)
P = "model.layers.0.self_attn.q_proj"
good = {P + ".weight": t_u8(q), P + ".weight_scale": t_u8(sb, "F8_E4M3"), P + ".weight_scale_2": t_f32(s2, [])}
def case(name, **change):
    d = dict(good)
    for k, v in change.items():
        k = P + "." + k
        if v is None:
            del d[k]
        else:
            d[k] = v
    os.makedirs(name, exist_ok=True)
    write_st(os.path.join(name, "model.safetensors"), d)
case("no_scale2", weight_scale_2=None)
case("no_scale", weight_scale=None)
case("no_codes", weight=None)
case("f32_scale", weight_scale=t_f32(np.ones((32, 4), np.float32)))
case("short_scale", weight_scale=t_u8(sb[:, :3], "F8_E4M3"))
case("nan_scale2", weight_scale_2=t_f32(np.float32("nan"), []))
case("neg_scale2", weight_scale_2=t_f32(np.float32(-1), []))
case("two_scale2", weight_scale_2=t_f32(np.ones(3, np.float32)))
# gpt-oss blocks without scales, compressed-tensors without its global scale
os.makedirs("blocks", exist_ok=True)
write_st("blocks/model.safetensors", {"m.experts.gate_up_proj_blocks": t_u8(np.zeros((2, 8, 2, 16), np.uint8))})
os.makedirs("ct", exist_ok=True)
write_st("ct/model.safetensors", {P + ".weight_packed": t_u8(q), P + ".weight_scale": t_u8(sb, "F8_E4M3")})
# truncated file
b = open("no_scale2/model.safetensors", "rb").read()
os.makedirs("trunc", exist_ok=True)
open("trunc/model.safetensors", "wb").write(good and open("f32_scale/model.safetensors", "rb").read()[:-40])
# an index naming a tensor its file lacks
os.makedirs("index", exist_ok=True)
write_st("index/a.safetensors", good)
json.dump({"weight_map": {P + ".weight": "a.safetensors", P + ".bias": "a.safetensors"}},
          open("index/model.safetensors.index.json", "w"))
EOF
check3() {  # check3 DIR PATTERN: ls and dequant refuse DIR with exit 3, name the file, write nothing
    expect 3 "$2" fp4-ckpt ls "$1"
    grep -q "$1" "$T/err" || { cat "$T/err"; fail "$1: the message names no file"; }
    expect 3 "$2" fp4-ckpt dequant "$1" model.layers.0.self_attn.q_proj -o "$1.npy"
    [ ! -e "$1.npy" ] || fail "$1: an output was written"
    ls "$T" | grep -q "$1.npy.tmp" && fail "$1: a temporary was left"
    return 0
}
check3 no_scale2 "model.layers.0.self_attn.q_proj.weight_scale_2 is missing"
check3 no_scale "model.layers.0.self_attn.q_proj.weight_scale is missing"
check3 no_codes "model.layers.0.self_attn.q_proj.weight is missing (its block scales"
check3 f32_scale "q_proj.weight_scale: NVFP4 block scales must be F8_E4M3, found F32"
check3 short_scale "q_proj.weight \[32, 32\] and model.layers.0.self_attn.q_proj.weight_scale \[32, 3\] do not fit"
check3 nan_scale2 "weight_scale_2: weight_scale_2 is nan, not a finite positive number"
check3 neg_scale2 "weight_scale_2 is -1, not a finite positive number"
check3 two_scale2 "weight_scale_2 must hold one value, found shape \[3\]"
check3 blocks "m.experts.gate_up_proj_scales is missing"
check3 ct "q_proj.weight_global_scale is missing (NVFP4 needs the per-tensor global scale)"
check3 trunc "run past the"
check3 index "model.safetensors.index.json: maps model.layers.0.self_attn.q_proj.bias to a.safetensors, but that file lacks it"

# configs: an entry naming no module, a list naming no layer, a regex that does not compile, not a config
cp -r good/modelopt m2
"$PY" - <<'EOF'
import json
c = json.load(open("m2/hf_quant_config.json"))
c["quantization"]["exclude_modules"].append("model.layers.9.mlp.gate")
json.dump(c, open("m2/hf_quant_config.json", "w"))
json.dump({"quantization_config": {"quant_method": "compressed-tensors", "ignore": ["re:lm_head("]}},
          open("badre.json", "w"))
json.dump({"architectures": ["X"]}, open("plain.json", "w"))
EOF
echo "model.layers.0.self_attn.q_proj nvfp4 te" > q.txt
echo "model.layers.7.self_attn.q_proj nvfp4 te" > missing.txt
expect 3 "m2/hf_quant_config.json: quantization.exclude_modules\[2\] 'model.layers.9.mlp.gate' names no module" \
    fp4-ckpt audit m2 --trainer q.txt
expect 3 "missing.txt: model.layers.7.self_attn.q_proj names no linear module" fp4-ckpt audit good/modelopt --trainer missing.txt
expect 3 "badre.json: quantization_config.ignore\[0\] 're:lm_head(': not a regular expression" fp4-ckpt audit good/modelopt --trainer q.txt --config badre.json
expect 3 "plain.json: no quantization config" fp4-ckpt audit good/modelopt --trainer q.txt --config plain.json
# check: a checkpoint weight the trainer lacks fails the check (1), a trainer that is not there is 3
expect 1 "" fp4-ckpt check good/modelopt --trainer good/ct -p modelopt --names '*o_proj'
grep -q "no trainer weight found" "$T/out" || fail "check: missing trainer weight"
expect 3 "nothere: cannot open" fp4-ckpt check good/modelopt --trainer nothere
expect 2 "--tensor-scale: expected checkpoint or weights" fp4-ckpt check good/modelopt --trainer good/trainer --tensor-scale x
expect 2 "expected a command" fp4-ckpt
echo ok
