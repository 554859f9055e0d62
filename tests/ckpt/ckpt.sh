#!/bin/sh
# fp4-ckpt on checkpoints written by tests/ckpt/make_ckpt.py from the
# producers' arithmetic: every layout read, dequantized bit for bit against
# the producer's dequantization, checked equal against the trainer weights with
# the producer's profile; a planted difference named by its block; the audit's
# planted one-sided layer and differently scaled fused pair found.
. "$(dirname "$0")/../capture/common.sh"
cd "$T"
"$PY" "$SRC/tests/ckpt/make_ckpt.py" "$T"

# ls: every layout, decode scales (compressed-tensors' reciprocal undone)
fp4-ckpt ls modelopt > ls.txt
grep -q "10 quantized weights" ls.txt || { cat ls.txt; fail "modelopt: 10 weights expected"; }
grep -q "model.layers.1.mlp.experts.1.up_proj .*modelopt-nvfp4" ls.txt || fail "ls: expert weight"
fp4-ckpt ls --json ct > ct.json
fp4-ckpt ls --json gptoss > g.json
"$PY" - <<'EOF'
import json, numpy as np
ct = json.load(open("ct.json"))["weights"][0]
assert ct["layout"] == "compressed-tensors-nvfp4" and ct["input_scale"] is not None, ct
gs = np.float32(ct["global_scale_stored"])
assert np.float32(ct["global_scale"]) == np.float32(1) / gs, ct   # the decode scale is 1 / stored
g = json.load(open("g.json"))["weights"]
assert [w["name"] for w in g] == ["model.layers.2.mlp.experts.down_proj", "model.layers.2.mlp.experts.gate_up_proj"], g
assert g[1]["experts"] == 2 and g[1]["rows"] == 128 and g[1]["cols"] == 64 and g[0]["cols"] == 64, g
EOF

# dequant: bit for bit the producers' own dequantization
for w in model.layers.0.self_attn.q_proj model.layers.0.self_attn.o_proj model.layers.1.mlp.experts.1.gate_proj \
         model.layers.1.mlp.experts.0.down_proj; do
    fp4-ckpt dequant modelopt "$w" -o "$w.npy"
done
fp4-ckpt dequant ct model.layers.0.self_attn.q_proj -o ct.npy
fp4-ckpt dequant gptoss model.layers.2.mlp.experts.gate_up_proj -o gu.npy
fp4-ckpt dequant gptoss model.layers.2.mlp.experts.down_proj -o dn1.npy --expert 1
"$PY" - <<'EOF'
import numpy as np
for w in ["model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.o_proj",
          "model.layers.1.mlp.experts.1.gate_proj", "model.layers.1.mlp.experts.0.down_proj"]:
    a, b = np.load(w + ".npy"), np.load("ref/%s.npy" % w)
    assert a.dtype == np.float32 and a.tobytes() == b.tobytes(), w
assert np.load("ct.npy").tobytes() == np.load("ref/ct.q_proj.npy").tobytes()
assert np.load("gu.npy").tobytes() == np.load("ref/gptoss.gate_up_proj.npy").tobytes()
dn = np.load("ref/gptoss.down_proj.npy")
assert np.load("dn1.npy").tobytes() == dn[dn.shape[0] // 2:].tobytes()
EOF

# check: the producer's profile reproduces every scale and code
fp4-ckpt check modelopt --trainer trainer -p modelopt > check.txt || { cat check.txt; fail "modelopt check"; }
grep -q "0 of 10 weights differ" check.txt || { cat check.txt; fail "modelopt: all equal"; }
grep -q "global scale: shared (fused group)" check.txt || fail "gate/up share the fused scale"
grep -q "trainer: model.layers.1.mlp.experts.gate_up_proj\[1\] rows 32..63" check.txt || fail "fused trainer split"
fp4-ckpt check gptoss --trainer trainer -p ceil > g.txt || { cat g.txt; fail "gpt-oss check"; }
grep -q "(transposed)" g.txt || fail "gpt-oss trainer stacks are [E, in, out]"
fp4-ckpt check ct --trainer trainer -p modelopt --json > ct.txt || true
"$PY" - <<'EOF'
import json
w = json.load(open("ct.txt"))["weights"][0]
assert w["scale_diff"] == 0 and w["code_diff"] == 0, w   # the codes ModelOpt's arithmetic makes with 1/global
EOF
# another profile differs, and says where
expect 1 "" fp4-ckpt check modelopt --trainer trainer -p te --names '*q_proj'
grep -q "^DIFFER model.layers.0.self_attn.q_proj" "$T/out" || { cat "$T/out"; fail "te differs from modelopt"; }

# a planted difference: one block scale of one expert, named with its block
"$PY" - <<'EOF'
import json, struct
f = "modelopt/model-00002-of-00002.safetensors"
b = bytearray(open(f, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
e = h["model.layers.1.mlp.experts.1.down_proj.weight_scale"]
# row 5, block 1 of [64, 2]
off = 8 + n + e["data_offsets"][0] + 5 * 2 + 1
b[off] = b[off] ^ 0x08 if (b[off] ^ 0x08) & 0x7F != 0x7F else b[off] ^ 0x10
open(f, "wb").write(b)
EOF
expect 1 "" fp4-ckpt check modelopt --trainer trainer -p modelopt --names '*experts.1.down_proj'
grep -q "first differing block: row 5, block 1 (columns 16..31)" "$T/out" || { cat "$T/out"; fail "the planted block"; }
grep -q "block scales: 1 of 128 differ" "$T/out" || { cat "$T/out"; fail "one scale differs"; }

# audit: a planted one-sided layer (the trainer quantizes o_proj, the config excludes it),
# gate/up of one expert scaled differently
cat > q.txt <<'EOF'
# the trainer's fake-quantized layers
model.layers.0.self_attn.*_proj nvfp4 te
model.layers.1.mlp.experts.* nvfp4 te
EOF
"$PY" - <<'EOF'
import json, struct
import numpy as np
p = "modelopt/hf_quant_config.json"
c = json.load(open(p))
c["quantization"]["exclude_modules"].append("model.layers.0.self_attn.o_proj")
json.dump(c, open(p, "w"))
# expert 1's up_proj gets its own weight_scale_2 (twice the shared one)
f = "modelopt/model-00002-of-00002.safetensors"
b = bytearray(open(f, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
e = json.loads(b[8:8 + n])["model.layers.1.mlp.experts.1.up_proj.weight_scale_2"]
off = 8 + n + e["data_offsets"][0]
v = np.frombuffer(bytes(b[off:off + 4]), np.float32)[0] * np.float32(2)
b[off:off + 4] = np.float32(v).tobytes()
open(f, "wb").write(b)
EOF
expect 1 "" fp4-ckpt audit modelopt --trainer q.txt --check
grep -q "self_attn.o_proj .*DISAGREE" "$T/out" || { cat "$T/out"; fail "audit: one-sided o_proj"; }
grep -q "holds FP4 weights the config excludes (model.layers.0.self_attn.o_proj)" "$T/out" || fail "audit: reason"
grep -q "experts.1.gate_up_proj .*DISAGREE" "$T/out" || { cat "$T/out"; fail "audit: planted gate/up scale"; }
grep -q "qkv_proj .*ok" "$T/out" || fail "audit: qkv agrees"
grep -q "mlp.gate .*bf16 (excluded: model.layers.1.mlp.gate) *ok" "$T/out" || { cat "$T/out"; fail "router"; }
fp4-ckpt audit --json modelopt --trainer q.txt > a.json
"$PY" - <<'EOF'
import json
a = json.load(open("a.json"))
bad = {l["layer"] for l in a["layers"] if l["problems"]}
assert bad == {"layers.0.self_attn.o_proj", "layers.1.mlp.experts.1.gate_up_proj"}, bad
EOF
echo ok
