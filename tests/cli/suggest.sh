#!/bin/sh
# "Did you mean" (issue 26 item 7): a mistyped profile, metric, site, dataset,
# tensor or long option gets the nearest names, and long lists are capped;
# fp4-capture import into an existing capture names -a/--append.
set -eu
. "$FP4S_SRCDIR/tests/python.sh"
. "$FP4S_SRCDIR/tests/lib.sh"
D=$SRC/datasets
W=$D/weight-small.npy
cap=$D/synth-tiny.h5

# profiles, and the other names of the quantizer tables; the list capped
expect 2 "" fp4-quant -p ocpp "$W"
expect_err "-p: unknown profile 'ocpp'; did you mean 'ocp'? profiles for mxfp4: ocp, ceil,"
expect_err "in all)"
expect 2 "" fp4-quant -f nvfp4 -p torcaho "$W"
expect_err "did you mean 'torchao'"
expect 2 "" fp4-quant --scale-rule ciel "$W"
expect_err "--scale-rule: expected one of"
expect_err "got 'ciel'; did you mean 'ceil'"
# long options
expect 2 "" fp4-quant --formt mxfp4 "$W"
expect_err "unknown option '--formt'; did you mean '--format'"
expect 2 "" fp4-mismatch --gate-metircs k3 "$D/traces/planted.csv"
expect_err "did you mean '--gate-metrics'"
expect 2 "" fp4-report --sits x "$cap"
expect_err "did you mean '--sites'"
# metrics, by any framework's name, and the per-step scalars of a log
expect 2 "" fp4-mismatch --metric k33 "$D/traces/planted.csv"
expect_err "--metric: unknown metric 'k33'; did you mean 'k3'"
expect 2 "" fp4-mismatch --metric rollout_corr/k3kl "$D/traces/planted.csv"
expect_err "did you mean 'rollout_corr/k3_kl'"
expect 2 "" fp4-mismatch --metric critic/score/man "$D/traces/verl.jsonl"
expect_err "did you mean 'critic/score/mean'"
expect 2 "" fp4-mismatch --gate --gate-metrics mean_abz,k3 "$D/traces/planted.csv"
expect_err "--gate-metrics: unknown metric 'mean_abz'; did you mean 'mean_abs'"
expect 2 "" fp4-plot mismatch --y2 critic/score/man "$D/traces/verl.jsonl" -o p.png
expect_err "no run has a value of 'critic/score/man'; did you mean 'critic/score/mean'?"
# sites: --sites that selects nothing offers the glob with the nearest prefix
expect 3 "" fp4-decompose --sites 'layers.0.self_atn*' "$cap"
expect_err "no dataset matches --sites layers.0.self_atn*; did you mean 'layers.0.self_attn*'? sites: "
expect 3 "" fp4-decompose --sites 'layers.0.mlp.experts.0.up_prj' "$cap"
expect_err "did you mean 'layers.0.mlp.experts.0.up_proj'"
expect 3 "" fp4-capture ls --sites 'layers.0.self_atn*' "$cap"
expect_err "did you mean 'layers.0.self_attn*'"
expect 3 "" fp4-report --sites 'qkv*' -o rep "$cap"
expect_err "did you mean '*qkv*'? sites: layers.0."
# datasets of an HDF5 file and tensors of a safetensors file
expect 3 "" fp4-quant "$cap:/steps/0/layers.0.self_attn.qkv_proj/rollot"
expect_err "dataset not found; did you mean '/steps/0/layers.0.self_attn.qkv_proj/rollout'"
expect 3 "" fp4-quant "$cap:steps/1/layers.0.self_attn.qkv_proj/trainr"
expect_err "did you mean '/steps/1/layers.0.self_attn.qkv_proj/trainer'"
$PY - <<'PYEOF'
import json, struct
import numpy as np
a = np.arange(64, dtype=np.float32).reshape(2, 32)
hdr = {"model.layers.0.mlp.down_proj.weight": {"dtype": "F32", "shape": [2, 32], "data_offsets": [0, a.nbytes]}}
h = json.dumps(hdr).encode()
with open("m.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + a.tobytes())
PYEOF
expect 3 "" fp4-quant "m.safetensors:model.layers.0.mlp.down_prj.weight"
expect_err "tensor not found; did you mean 'model.layers.0.mlp.down_proj.weight'?"
# an existing capture: fp4-capture import names -a/--append before --force
$PY -c 'import numpy as np; np.save("x.npy", np.ones((4, 32), np.float32))'
fp4-capture import x.npy -o c.h5 --step 0 --side rollout --site layers.0.up
expect 2 "" fp4-capture import x.npy -o c.h5 --step 0 --side trainer --site layers.0.up
expect_err "import: c.h5 exists and is a capture: -a/--append adds these tensors to it; --force replaces it"
expect 0 "" fp4-capture import x.npy -o c.h5 -a --step 0 --side trainer --site layers.0.up
echo ok
