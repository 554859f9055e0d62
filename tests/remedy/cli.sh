#!/bin/sh
# Golden CLI tests of fp4-remedy: exit codes and messages for bad input
# (shape mismatches between X, X_t and W, unknown remedies, parameters out of
# range, missing sites and weights, non-finite data), the --json / --csv / -o
# contracts, outputs that would replace an input, capture mode and --plan.
. "${FP4S_SRCDIR:?}/tests/python.sh"
. "$FP4S_SRCDIR/tests/lib.sh" # T, expect CODE STDERR-PATTERN CMD...
count_failures # every failure is reported and counted; failures_end at the end

"$PY" - <<'EOF'
import numpy as np, h5py
rng = np.random.default_rng(11)
a = (rng.standard_normal((40, 128)) * np.where(np.arange(128) % 29 == 3, 20, 1)).astype(np.float32)
np.save("a.npy", a)
np.save("t.npy", (a * (1 + 1e-3 * rng.standard_normal(a.shape))).astype(np.float32))
np.save("w.npy", (0.05 * rng.standard_normal((24, 128))).astype(np.float32))
np.save("t_short.npy", a[:30])
np.save("w_k96.npy", (0.05 * rng.standard_normal((24, 96))).astype(np.float32))
np.save("a_k100.npy", rng.standard_normal((8, 100)).astype(np.float32))
np.save("w_k100.npy", rng.standard_normal((8, 100)).astype(np.float32))
b = a.copy(); b[3, 7] = np.nan
np.save("a_nan.npy", b)
with h5py.File("noweight.h5", "w") as f:
    f.attrs["fp4scope_schema"] = "fp4scope-capture/1"
    g = f.create_group("steps/0/layers.0.mlp.up_proj")
    g["rollout"] = a[:16]
    g["trainer"] = a[:16]
EOF
R=fp4-remedy

# --- bad command lines (2) ---
expect 2 "unknown remedy 'foo'" $R --act a.npy --weight w.npy --remedy none,foo
expect 2 "R must be in (0, 1], got 1.5" $R --act a.npy --weight w.npy --remedy rac:1.5
expect 2 "R must be in (0, 1], got 0" $R --act a.npy --weight w.npy --remedy rac:0
expect 2 "ALPHA must be in \[0, 1\], got 2" $R --act a.npy --weight w.npy --remedy of:2
expect 2 "G = 48 must be a multiple of the activation block size 32" $R --act a.npy --weight w.npy --remedy mbs:48
expect 2 "use mbs:128:mse" $R -f nvfp4 --act a.npy --weight w.npy --remedy mbs:128:max
expect 2 "K must be in \[1, 31\]" $R --act a.npy --weight w.npy --remedy keep:32
expect 2 "empty item" $R --act a.npy --weight w.npy --remedy none,,of
expect 2 "accelerator 'tpu': unknown (known: b200" $R --act a.npy --weight w.npy --accel tpu
expect 2 "--weight W is needed" $R --act a.npy
expect 2 "no input" $R
expect 2 "not both" $R --act a.npy --weight w.npy noweight.h5
expect 2 "--select: expected tensor or tile:ROWS" $R --act a.npy --weight w.npy --select rows
expect 2 "--plan" $R --act a.npy --weight w.npy --plan -1
expect 2 "" $R --bogus

# --- bad input (3) ---
expect 3 "shape mismatch: trainer activations t_short.npy are \[30, 128\], rollout activations a.npy are \[40, 128\]" \
    $R --act a.npy --trainer-act t_short.npy --weight w.npy --remedy none
expect 3 "shape mismatch: weight w_k96.npy is \[24, 96\], its K = 96 differs from the activations' K = 128" \
    $R --act a.npy --weight w_k96.npy --remedy none
expect 3 "K = 100 is not a multiple of the activation block size 32" $R --act a_k100.npy --weight w_k100.npy --remedy none
expect 3 "activation: element (3, 7) is NaN" $R --act a_nan.npy --weight w.npy --remedy none
expect 3 "missing.npy" $R --act missing.npy --weight w.npy --remedy none
expect 3 "no site matches --sites nothing.*" $R --sites 'nothing.*' "$FP4S_SRCDIR/datasets/synth-tiny.h5"
expect 3 "no site matches --steps 99" $R --steps 99 "$FP4S_SRCDIR/datasets/synth-tiny.h5"
expect 3 "site layers.0.mlp.up_proj step 0 has no weight" $R noweight.h5

# --- no partial output, inputs protected (2) ---
expect 3 "" $R --act a_nan.npy --weight w.npy --remedy none -o out.h5
[ ! -e out.h5 ] || fail "a failed run left out.h5"
ls ./*.tmp.* >/dev/null 2>&1 && fail "a temporary file was left"
expect 4 "no_such_dir" $R --act a.npy --weight w.npy --remedy none -o no_such_dir/out.h5
expect 4 "no_such_dir" $R --act a.npy --weight w.npy --remedy none -o no_such_dir/out.json
cp w.npy w_copy.npy
expect 2 "is also an input (w.npy)" $R --act a.npy --weight w.npy --remedy none -o w.npy
cmp -s w.npy w_copy.npy || fail "-o over an input changed it"

# --- outputs ---
expect 0 "" $R --act a.npy --trainer-act t.npy --weight w.npy --remedy none,rac:0.25,mbs:128+of:0.5,wfq --json
"$PY" - <<'EOF' || fail "--json contract"
import json, math
d = json.load(open("out.txt"))
assert isinstance(d, list) and len(d) == 4, d
assert [o["remedy"] for o in d] == ["none", "rac:0.25", "mbs:128+of:0.5", "wfq"]
for o in d:
    for k in ("out_rel_error", "out_rel_error_vs_wfq", "out_rel_error_vs_w4a4qat", "act_extra_bits",
              "flops_extra", "bytes_extra", "predicted_seconds", "time_vs_fp8", "time_vs_bf16",
              "act_before", "act_after", "dz_left", "removable_before"):
        assert k in o, k
assert d[0]["canonical"] == "none" and d[2]["canonical"] == "mbs:128+of:0.5"
assert d[3]["side"] == "trainer" and d[0]["side"] == "rollout"
assert d[1]["out_rel_error_vs_wfq"] < d[0]["out_rel_error_vs_wfq"]
assert len(d[1]["rac_set"]) == 32 and d[0]["rac_set"] is None
assert d[1]["flops_extra"] == 2 * 40 * 24 * 32
assert abs(d[0]["act_before"]["relative_error"] - d[0]["act_rel_error"]) < 1e-12
assert d[0]["trainer_activations"] is True and 0 < d[0]["input_rel_diff"] < 1e-2
EOF
expect 0 "" $R --act a.npy --weight w.npy --remedy none,of --csv
head -1 out.txt | grep -q '^source,site,step,remedy,side,out_rel_error,out_rel_error_vs_wfq,' || fail "--csv header"
[ "$(wc -l < out.txt)" -eq 3 ] || fail "--csv: expected 3 lines"
expect 0 "" $R --act a.npy --weight w.npy --remedy none,of:0.5 -o rep.h5
"$PY" - <<'EOF' || fail "HDF5 report"
import h5py
f = h5py.File("rep.h5", "r")
assert f.attrs["tool"] == "fp4-remedy" and int(f.attrs["rows"]) == 2
assert [s.decode() if isinstance(s, bytes) else s for s in f["remedy"][()]] == ["none", "of:0.5"]
assert f["out_rel_error"].shape == (2,) and f["out_rel_error"][1] < f["out_rel_error"][0]
assert "description" in f["out_rel_error_vs_wfq"].attrs
EOF
expect 0 "" $R --act a.npy --weight w.npy --remedy none -o rep.json
"$PY" -c "import json; d = json.load(open('rep.json')); assert d[0]['remedy'] == 'none'" || fail "-o .json"
expect 0 "" $R --list-remedies
grep -q "rac-rand:R\[:RESID\]\[:SEED\]" out.txt || fail "--list-remedies"
expect 0 "" $R --list-accels
grep -q "mi355x" out.txt || fail "--list-accels"

# --- capture mode and the plan ---
expect 0 "" $R --sites 'layers.0.*' --steps 0,1 --remedy none,rac:0.25 "$FP4S_SRCDIR/datasets/synth-tiny.h5"
grep -q "(synthetic capture)" out.txt || fail "capture rows not labelled synthetic"
[ "$(grep -c '^site ' out.txt)" -ge 2 ] || fail "capture mode: expected several sites"
expect 0 "" $R --plan 0.3 --json "$FP4S_SRCDIR/datasets/synth-tiny.h5"
"$PY" - <<'EOF' || fail "--plan --json"
import json
d = json.load(open("out.txt"))
p = d["plan"]
assert p["extra_flops"] <= p["budget_flops"] * (1 + 1e-12)
assert p["mismatch_left"] <= 1 + 1e-12 and p["trainer"] == "bf16"
assert set(p["remedy_per_site"]) == {s["site"] for s in p["sites"]}
for s, ch in p["channels"].items():
    assert p["remedy_per_site"][s].startswith("rac"), s
    assert ch == sorted(ch) and len(set(ch)) == len(ch)
EOF
expect 0 "" $R --plan 0 "$FP4S_SRCDIR/datasets/synth-tiny.h5"
grep -q "^# sites to keep in BF16" out.txt || fail "--plan text lists"
grep -q "total: extra 0.00% of the W4A4 FLOPs" out.txt || fail "--plan 0 must spend nothing"
expect 2 "no rollout item" $R --plan 0.1 --remedy wfq,bf16 "$FP4S_SRCDIR/datasets/synth-tiny.h5"
# the plan's naive W4A4 mismatch (what its shares are of) is the plain item's, wherever it stands
# in the list and whatever other item follows it (sr, rht and 4over6 are remedies, not none)
for l in none,sr:1 sr:1,none none,rht none,4over6:mse; do
    expect 0 "" $R -f nvfp4 -p te --plan 0.1 --json --remedy $l "$FP4S_SRCDIR/datasets/synth-tiny.h5"
    grep -o '"naive_mismatch2": [^,]*' out.txt > "none.$l.txt"
    [ -s "none.$l.txt" ] || fail "--plan --json: no naive_mismatch2"
done
for l in sr:1,none none,rht none,4over6:mse; do
    cmp -s none.none,sr:1.txt "none.$l.txt" ||
        fail "--plan --remedy $l: none's total $(cat "none.$l.txt") is not none's $(cat none.none,sr:1.txt)"
done

# --- the logits path ---
"$FP4S_BUILDDIR/tests/remedy/make_logits_capture" lg.h5 6 || fail "make_logits_capture"
expect 0 "" $R -f nvfp4 --logits --remedy none,rac:0.5 lg.h5
grep -q "^all 3 steps" out.txt || fail "--logits: no pooled table"
expect 0 "" $R -f nvfp4 --logits --steps 1 --remedy wfq,none,rac:1:bf16 --json -o lg.json lg.h5
"$PY" - <<'EOF2' || fail "--logits --json"
import json
d = json.load(open("out.txt"))
assert d == json.load(open("lg.json"))
assert [r["remedy"] for r in d] == ["none", "rac:1:bf16", "none", "rac:1:bf16"]   # trainer items dropped
assert d[0]["step"] == 1 and d[2]["step"] is None
assert d[1]["max_abs"] < d[0]["max_abs"] and d[1]["k3"] < d[0]["k3"]
EOF2
expect 2 "--logits reads a CAPTURE" $R --logits --act a.npy --weight w.npy
expect 2 "give FILE.json" $R --logits -o lg.h5 lg.h5
expect 2 "no rollout item" $R --logits --remedy wfq lg.h5
expect 3 "no step holds the site lm_head" $R --logits "$FP4S_SRCDIR/datasets/synth-tiny.h5"
expect 3 "the logits path needs the logprobs/token" $R --logits --lm-head layers.0.mlp.experts.0.up_proj \
    "$FP4S_SRCDIR/datasets/synth-tiny.h5"
"$PY" - <<'EOF2'
import h5py, shutil
shutil.copy("lg.h5", "lg_bad.h5")
with h5py.File("lg_bad.h5", "r+") as f:
    del f["steps/0/logprobs/token"]
    f["steps/0/logprobs/token"] = f["steps/1/logprobs/token"][()][:10]
    f["steps/1/logprobs/token"][3] = 10**6
EOF2
expect 3 "token (10), seq (96) and trainer (96) differ in length" $R -f nvfp4 --logits --steps 0 lg_bad.h5
expect 3 "token 1000000 of row 3 is outside the vocabulary \[0, 256)" $R -f nvfp4 --logits --steps 1 lg_bad.h5

# --- fp4-compare ---
C=fp4-compare
expect 2 "no input" $C
expect 2 "no input" $C --act a.npy --weight w.npy
expect 2 "--json and --csv" $C --act a.npy --trainer-act t.npy --weight w.npy --json --csv
expect 3 "shape mismatch: trainer activations t_short.npy are \[30, 128\], rollout activations a.npy are \[40, 128\]" \
    $C --act a.npy --trainer-act t_short.npy --weight w.npy
expect 3 "shape mismatch: weight w_k96.npy" $C --act a.npy --trainer-act t.npy --weight w_k96.npy
expect 3 "rollout activation: element (3, 7) is NaN" $C --act a_nan.npy --trainer-act a.npy --weight w.npy
expect 3 "no site with both trainer and rollout activations matches --sites none.*" \
    $C --sites 'none.*' "$FP4S_SRCDIR/datasets/synth-tiny.h5"
expect 3 "has no weight" $C noweight.h5
expect 0 "" $C --act a.npy --trainer-act t.npy --weight w.npy --json --top 5 -o cmp.json
"$PY" - <<'EOF2' || fail "fp4-compare --json contract"
import json
d = json.load(open("out.txt"))
assert d == json.load(open("cmp.json"))
s = d["sites"][0]
assert abs(sum(s["shares"].values()) - 1) < 1e-9
assert len(s["channels"]) == 128 and len(d["ranking"]) == 5
r = d["ranking"]
assert all(r[i]["contribution"] >= r[i + 1]["contribution"] for i in range(4))
assert 0 < s["code_flips"] < 1 and s["amplification"] > 0 and s["input_rel_diff"] < 1e-2
EOF2
expect 0 "" $C --csv "$FP4S_SRCDIR/datasets/synth-tiny.h5"
head -1 out.txt | grep -q '^source,site,step,channel,input_rel_diff,code_flips,scale_flips,amplification,contribution_input' || fail "fp4-compare --csv header"
expect 0 "" $C --steps 0 "$FP4S_SRCDIR/datasets/synth-tiny.h5"
grep -q "^ranking (pooled over steps)" out.txt || fail "fp4-compare table"

# per expert and per layer: each pooled row's relative error, share and
# routing share recomputed from the per-site records of the same document
fp4-capture synth -o moe.h5 --seed 5 --layers 2 --experts 2 --top-k 1 --tokens 64 --hidden 64 \
    --out-features 32 --steps 2 --act-every 1 --seqs 4 --seq-len 16 --f32 > /dev/null 2>&1 || fail "synth moe.h5"
"$PY" - <<'EOF2' || fail "moe.h5: token ids"
import h5py, numpy as np
with h5py.File("moe.h5", "r+") as f:
    g = f["steps/0/layers.1.mlp.experts.0.up_proj"]   # the rollout routed its last token elsewhere
    x = g["rollout"][()]
    ids = np.stack([np.zeros(len(x), np.int64), np.arange(len(x), dtype=np.int64)], axis=1)
    del g["rollout"]
    g["rollout"] = x[:-1]
    g["trainer_ids"] = ids
    g["rollout_ids"] = ids[:-1]
EOF2
for ids in no yes; do
    cap=moe.h5
    if [ $ids = no ]; then # the same rows without ids: both sides hold the same tokens
        cap=moe_noids.h5
        cp moe.h5 $cap
        "$PY" - <<'EOF2' || fail "moe_noids.h5"
import h5py
with h5py.File("moe_noids.h5", "r+") as f:
    g = f["steps/0/layers.1.mlp.experts.0.up_proj"]
    x = g["trainer"][()][:-1]
    for k in ("trainer_ids", "rollout_ids", "trainer"):
        del g[k]
    g["trainer"] = x
EOF2
    fi
    expect 0 "" $C --json $cap
    IDS=$ids "$PY" - <<'EOF2' || fail "fp4-compare per expert / per layer (ids $ids)"
import json, math, os
d = json.load(open("out.txt"))
ids = os.environ["IDS"] == "yes"
S, total = d["sites"], d["total_mismatch2"]
def check(rows, key):
    seen = []
    for r in rows:
        mine = [s for s in S if all(s.get(k) == r[k] for k in key)]
        m2, r2 = sum(s["mismatch2"] for s in mine), sum(s["ref2"] for s in mine)
        assert r["sites"] == len(mine) > 0 and r["tokens"] == sum(s["m"] for s in mine), r
        assert math.isclose(r["mismatch2"], m2, rel_tol=1e-12) and math.isclose(r["ref2"], r2, rel_tol=1e-12), r
        assert math.isclose(r["mismatch_rel"], math.sqrt(m2 / r2), rel_tol=1e-12), r
        assert math.isclose(r["share"], m2 / total, rel_tol=1e-12), r
        assert ("routing_share" in r) == ids and ("trainer_only" in r) == ids, r
        if ids:
            rt = sum(s["shares"]["routing"] * s["mismatch2"] for s in mine)
            assert math.isclose(r["routing_share"], rt / m2, rel_tol=1e-9, abs_tol=1e-15), r
            assert r["trainer_only"] == sum(s.get("trainer_only", 0) for s in mine), r
        seen.append(tuple(r[k] for k in key))
    assert seen == sorted(seen), seen
    return seen
assert check(d["layers"], ("layer",)) == [(0,), (1,)]
assert len(check(d["experts"], ("layer", "expert"))) == 4
assert math.isclose(sum(r["share"] for r in d["layers"]), 1, rel_tol=1e-12)
if ids:
    e = [r for r in d["experts"] if (r["layer"], r["expert"]) == (1, 0)][0]
    assert e["trainer_only"] == 1 and e["rollout_only"] == 0 and e["routing_share"] > 0, e
EOF2
    expect 0 "" $C $cap
    grep -q "^per layer (every site of the layer pooled over steps" out.txt || fail "per-layer table (ids $ids)"
    grep -A2 "^per expert" out.txt | grep -q "rel.error" || fail "per-expert table: rel.error column (ids $ids)"
done

failures_end
echo "fp4-remedy and fp4-compare CLI: all checks passed"
