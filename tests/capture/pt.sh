#!/bin/sh
# torch.save dumps (.pt) through the Python adapter (python3 -m fp4scope.pt):
# every float tensor bit for bit, nested dicts named with dots, other objects
# skipped; fp4-capture import says how to import a .pt instead of failing on
# its bytes; a failed import leaves nothing.
. "$(dirname "$0")/common.sh"
export FP4SCOPE_LIB="${FP4S_BUILDDIR:?}/libfp4scope.so"
export PYTHONPATH="$SRC/tools/python${PYTHONPATH:+:$PYTHONPATH}"
cd "$T"
"$PY" - <<'PYEOF'
import torch
torch.manual_seed(0)
d = {"layers.0.mlp.experts": {"1": {"up_proj": torch.randn(3, 5, 16).bfloat16()}},
     "layers.1.attn": [torch.randn(4, 16), torch.randn(2, 16).half()],
     "step": 7, "tokens": torch.arange(10)}
torch.save(d, "dump.pt")
torch.save(d, "legacy.pt", _use_new_zipfile_serialization=False)
torch.save({"a": torch.randn(2, 16), "b": torch.randn(2, 8)}, "clash.pt")
PYEOF
"$PY" -m fp4scope.pt dump.pt -o cap.h5 --step 3 --side rollout 2> log.txt
grep -q "step: not a tensor, skipped" log.txt || { cat log.txt; fail "the skipped leaves are listed"; }
grep -q "tokens: torch.int64 tensor, skipped" log.txt || { cat log.txt; fail "integer tensors are skipped"; }
"$PY" -m fp4scope.pt legacy.pt -o legacy.h5 --step 3 --side rollout --site 'old.{name}' 2>/dev/null
"$PY" - <<'PYEOF'
import h5py, numpy as np, torch
d = torch.load("dump.pt")
f = h5py.File("cap.h5", "r")
up = d["layers.0.mlp.experts"]["1"]["up_proj"]
got = f["/steps/3/layers.0.mlp.experts.1.up_proj/rollout"]
assert got.attrs["dtype"] == "bfloat16" and got.shape == (15, 16)
assert (got[()] == up.reshape(-1, 16).view(torch.int16).numpy().view(np.uint16)).all()
assert f["/steps/3/layers.0.mlp.experts.1.up_proj/rollout"].attrs["expert"] == 1
assert f["/steps/3/layers.1.attn.0/rollout"][()].tobytes() == d["layers.1.attn"][0].numpy().tobytes()
assert f["/steps/3/layers.1.attn.1/rollout"].dtype == np.float16
g = h5py.File("legacy.h5", "r")
assert g["/steps/3/old.layers.1.attn.0/rollout"][()].tobytes() == d["layers.1.attn"][0].numpy().tobytes()
PYEOF
# fp4-capture says how
expect 3 "a PyTorch torch.save file (a zip archive).*python3 -m fp4scope.pt dump.pt" fp4-capture import dump.pt -o x.h5 --step 0 --side rollout
expect 3 "a PyTorch torch.save file (a pickle)" fp4-capture import legacy.pt -o x.h5 --step 0 --side rollout
[ ! -e x.h5 ] || fail "fp4-capture wrote an output"
# failures write nothing: one site for two K, a file that is not a dump, an existing output
set +e
"$PY" -m fp4scope.pt clash.pt -o bad.h5 --step 0 --side rollout --site one 2> err.txt; rc=$?
set -e
[ "$rc" = 3 ] && grep -q "site one: tensors of K 16" err.txt || { cat err.txt; fail "clash: exit $rc"; }
[ ! -e bad.h5 ] && ! ls | grep -q 'bad.h5.tmp' || fail "a failed import left a file"
echo "not a dump" > junk.pt
set +e
"$PY" -m fp4scope.pt junk.pt -o bad.h5 --step 0 --side rollout 2> err.txt; rc=$?
"$PY" -m fp4scope.pt dump.pt -o cap.h5 --step 0 --side rollout 2> err2.txt; rc2=$?
set -e
[ "$rc" = 3 ] && grep -q "junk.pt: cannot load as a torch.save file" err.txt || { cat err.txt; fail "junk: exit $rc"; }
[ "$rc2" = 4 ] && grep -q "cap.h5: already exists" err2.txt || { cat err2.txt; fail "existing output: exit $rc2"; }
# -a appends another step
"$PY" -m fp4scope.pt dump.pt -o cap.h5 --step 4 --side trainer -a 2>/dev/null
fp4-capture ls cap.h5 | grep -q "4  layers.1.attn.0 *trainer" || fail "append"
echo ok
