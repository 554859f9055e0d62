#!/bin/sh
# Golden CLI tests of fp4-decompose and fp4-channels: exit codes, messages,
# the --json contract read by fp4-plot, --csv, HDF5/JSON outputs, capture
# batches with a synthetic label, non-finite data and atomic outputs.
. "${FP4S_SRCDIR:?}/tests/python.sh"
. "$FP4S_SRCDIR/tests/lib.sh" # T, expect CODE STDERR-PATTERN CMD...
count_failures # every failure is reported and counted; failures_end at the end

"$PY" - <<'EOF'
import numpy as np, h5py
rng = np.random.default_rng(5)
np.save("a.npy", rng.standard_normal((64, 128)).astype(np.float32))
np.save("w.npy", rng.standard_normal((48, 128)).astype(np.float32))
np.save("odd.npy", rng.standard_normal((4, 33)).astype(np.float32))
x = rng.standard_normal((8, 64)).astype(np.float32); x[0, 3] = np.nan; x[5, 40] = np.inf
np.save("nan.npy", x)
np.save("rank3.npy", np.zeros((2, 2, 32), dtype=np.float32))
np.save("int.npy", np.zeros((2, 32), dtype=np.int32))
open("trunc.npy", "wb").write(open("a.npy", "rb").read()[:300])
with h5py.File("plain.h5", "w") as f:
    f["x"] = np.zeros((4, 32), dtype=np.float32)
with h5py.File("cap.h5", "w") as f:
    f.attrs["fp4scope_schema"] = "fp4scope-capture/1"
    f.attrs["producer"] = "cli.sh"
    f.attrs["synthetic"] = 1
    for step in (0, 1, 2):
        for site in ("layers.0.mlp.down_proj", "layers.1.attn.q_proj"):
            g = f.create_group(f"steps/{step}/{site}")
            g["trainer"] = rng.standard_normal((16, 64)).astype(np.float32)
            g["rollout"] = rng.standard_normal((16, 64)).astype(np.float32)
EOF

# ---- help, version, usage ----------------------------------------------------
for t in fp4-decompose fp4-channels; do
    expect 0 "" $t --help
    grep -q "^Usage: $t" out.txt || fail "$t --help: no usage line"
    expect 0 "" $t --version
    grep -q "fp4scope" out.txt || fail "$t --version"
    expect 2 "unknown option" $t --bogus a.npy
    expect 2 "no INPUT" $t
    expect 2 "exclude each other" $t --json --csv a.npy
    expect 2 "mxfp4 only" $t -f nvfp4 --scale-rule ceil a.npy
    expect 2 "decomp\|defined for mxfp4 and nvfp4" $t -f fp8 a.npy
    expect 2 "profile\|-p" $t -p no-such-profile a.npy
    expect 3 "missing.npy" $t missing.npy
    expect 3 "multiple of the block size" $t odd.npy
done
# foundation bad-input list: each names the file and exits 3, no output
for bad in int.npy trunc.npy; do
    expect 3 "$bad" fp4-decompose $bad
    expect 3 "$bad" fp4-channels $bad
done
# rank 3 reads as [prod(leading), last] (libfp4scope(3)): 4 rows of 32
expect 0 "" fp4-decompose --json rank3.npy
grep -q '"rows": 4' out.txt && grep -q '"cols": 32' out.txt || fail "rank3.npy was not read as 4 x 32"
expect 3 "plain.h5" fp4-decompose plain.h5:/nope
expect 3 "plain.h5" fp4-decompose --sites '*' plain.h5
expect 3 "" fp4-decompose --by block a.npy huge-limit-is-not-hit.npy
expect 2 "expected tensor, block, row or channel" fp4-decompose --by bogus a.npy
expect 2 "expected spec, in or out" fp4-decompose --dz-tie maybe a.npy
expect 2 "needs --weight" fp4-channels --score hcp a.npy
expect 2 "exclude each other" fp4-channels --top 3 --ratio 0.5 a.npy
expect 2 "--ratio" fp4-channels --ratio 0 a.npy
expect 2 "--top" fp4-channels --top x a.npy
expect 3 "columns" fp4-channels --weight odd.npy a.npy

# ---- human table ---------------------------------------------------------------
expect 0 "" fp4-decompose a.npy
grep -q "scale ||e_scale||^2" out.txt || fail "table: no scale row"
grep -q "%" out.txt || fail "table: no percentages"

# ---- JSON contract (fp4-plot reads it) --------------------------------------------
expect 0 "" fp4-decompose --by row --json -p ocp --scale-rule ceil a.npy
cp out.txt dec.json
"$PY" - <<'EOF' || fails=$((fails + 1))
import json
d = json.load(open("dec.json"))
assert d["tool"] == "fp4-decompose" and d["format"] == "mxfp4" and d["profile"] == "ocp" and d["by"] == "row", d
i = d["inputs"][0]
for k in ("source", "step", "site", "side", "rows", "cols", "summary", "histograms", "groups"):
    assert k in i, k
assert i["step"] is None and i["site"] is None and i["side"] is None and i["rows"] == 64 and i["cols"] == 128
need = ["n", "energy_total", "energy_scale", "energy_deadzone", "energy_grid", "cross_scale_grid",
        "cross_scale_deadzone", "cross_deadzone_grid", "ratio_scale", "ratio_deadzone", "ratio_grid",
        "cos_scale_grid", "deadzone_fraction", "relative_error", "ratio_removable"]
for k in need:
    assert k in i["summary"], k
    assert k in d["rollup"], k
s = i["summary"]
assert s["n"] == 64 * 128
assert s["cross_scale_deadzone"] == 0.0  # CEIL lemma, exactly
assert abs(s["ratio_removable"] - (1 - s["ratio_deadzone"] - s["ratio_grid"])) < 1e-15
for h in ("delta", "error"):
    hh = i["histograms"][h]
    assert len(hh["edges"]) == len(hh["counts"]) + 1
assert sum(i["histograms"]["delta"]["counts"]) == s["gamma_blocks"]
assert len(i["groups"]) == 64 and i["groups"][5]["group"] == 5
assert abs(sum(g["energy_total"] for g in i["groups"]) - s["energy_total"]) <= 1e-12 * s["energy_total"]
assert d["rollup"]["energy_total"] == s["energy_total"]
EOF

# ---- CSV -------------------------------------------------------------------------
expect 0 "" fp4-decompose --csv --by channel a.npy
head -1 out.txt | grep -q "^kind,input,source,step,site,side,group,n,energy_total" || fail "csv header"
[ "$(grep -c '^group,' out.txt)" -eq 128 ] || fail "csv: 128 channel groups expected"
[ "$(grep -c '^rollup,' out.txt)" -eq 1 ] || fail "csv: one rollup line"

# ---- capture batch, synthetic label, roll-up, empty selection -----------------------
expect 0 "" fp4-decompose --sites 'layers.0.*' --steps 0,2 --json cap.h5
cp out.txt cap.json
"$PY" - <<'EOF' || fails=$((fails + 1))
import json
d = json.load(open("cap.json"))
ins = d["inputs"]
assert len(ins) == 4, len(ins)  # 2 steps x trainer/rollout of one site
assert sorted({i["step"] for i in ins}) == [0, 2]
assert all(i["site"] == "layers.0.mlp.down_proj" and i["synthetic"] is True for i in ins)
assert {i["side"] for i in ins} == {"trainer", "rollout"}
assert d["rollup"]["n"] == sum(i["summary"]["n"] for i in ins)
EOF
expect 0 "" fp4-decompose --sites 'layers.1.*' --sides rollout cap.h5
grep -q "synthetic capture" out.txt || fail "human table: synthetic label"
grep -q "roll-up over 3 inputs" out.txt || fail "human table: roll-up"
expect 3 "empty selection" fp4-decompose --sites 'nope.*' cap.h5
expect 3 "empty selection" fp4-decompose --steps 7 cap.h5
expect 3 "" fp4-decompose --sites '*' a.npy

# ---- non-finite data: counted, excluded, no invented numbers -------------------------
expect 0 "" fp4-decompose --json nan.npy
"$PY" -c "
import json; s = json.load(open('out.txt'))['inputs'][0]['summary']
assert s['nan'] == 1 and s['inf'] == 1 and s['nonfinite_blocks'] == 2 and s['excluded'] == 62, s
assert s['n'] == 8 * 64 - 64
" || fail "non-finite counts"
expect 0 "" fp4-decompose nan.npy
grep -q "non-finite: 1 NaN, 1 Inf" out.txt || fail "table: non-finite line"

# ---- HDF5 report and atomic output ------------------------------------------------
expect 0 "" fp4-decompose --by channel -o rep.h5 a.npy cap.h5:/steps/1/layers.0.mlp.down_proj/trainer
"$PY" - <<'EOF' || fails=$((fails + 1))
import h5py
with h5py.File("rep.h5", "r") as f:
    assert f.attrs["fp4scope_schema"] == "fp4scope-decompose/1"
    assert f.attrs["inputs"] == 2
    g = f["inputs/0"]
    assert g.attrs["rows"] == 64 and g.attrs["cols"] == 128 and g.attrs["n"] == 64 * 128
    assert g["groups/energy_total"].shape == (128,)
    assert g["histograms/delta/counts"].shape == (160,) and g["histograms/delta/edges"].shape == (161,)
    assert f["inputs/1"].attrs["synthetic"] == 1
    assert f["rollup"].attrs["n"] == 64 * 128 + 16 * 64
EOF
expect 4 "" fp4-decompose -o "$T/no/such/dir/r.h5" a.npy
expect 3 "" fp4-decompose -o bad.h5 a.npy missing.npy
[ ! -e bad.h5 ] || fail "failed run left bad.h5"
ls | grep -q '\.tmp\.' && fail "temporary file left behind"

# ---- fp4-channels: JSON contract, HDF5 and JSON set ------------------------------------
expect 0 "" fp4-channels --json --weight w.npy --score hcp --top 5 -o set.h5 a.npy
cp out.txt ch.json
"$PY" - <<'EOF' || fails=$((fails + 1))
import json, h5py
d = json.load(open("ch.json"))
assert d["tool"] == "fp4-channels" and d["score"] == "hcp"
assert d["selection"] == {"top": 5, "ratio": None, "count": 5}, d["selection"]
ch = d["channels"]
assert len(ch) == 128 and [c["rank"] for c in ch] == list(range(1, 129))
keys = ["channel", "rank", "score", "selected", "energy_total", "energy_scale", "energy_deadzone",
        "energy_grid", "relative_error", "residual_norm", "amax", "deadzone_fraction"]
for k in keys:
    assert k in ch[0], k
assert [c["selected"] for c in ch[:6]] == [True] * 5 + [False]
assert all(ch[i]["score"] >= ch[i + 1]["score"] for i in range(127))
assert all(abs(c["score"] - (c["mean_abs_dx"] + c["mean_abs_dw"])) < 1e-12 for c in ch)
cov = d["coverage"]
assert cov[-1]["ratio"] == 1.0 and abs(cov[-1]["share"] - 1.0) < 1e-12
assert all(cov[i]["share"] <= cov[i + 1]["share"] for i in range(len(cov) - 1))
assert d["cost"]["n_out"] == 48 and d["cost"]["padded"] == 32
with h5py.File("set.h5", "r") as f:
    assert f.attrs["fp4scope_schema"] == "fp4scope-channels/1" and f.attrs["count"] == 5
    assert list(f["selected/channel"][:]) == [c["channel"] for c in ch[:5]]
    assert f["channels/score"].shape == (128,)
    assert int(f["channels/rank"][ch[0]["channel"]]) == 1
    assert f["coverage/share"].shape == (len(cov),)
EOF
expect 0 "" fp4-channels --ratio 0.25 -o set.json a.npy
"$PY" -c "
import json; d = json.load(open('set.json'))
assert d['selection'] == {'top': None, 'ratio': 0.25, 'count': 32}, d['selection']
assert sum(c['selected'] for c in d['channels']) == 32
" || fail "set.json"
expect 0 "" fp4-channels --csv --score deadzone a.npy
[ "$(wc -l < out.txt)" -eq 129 ] || fail "channels csv: header + 128 rows"
expect 0 "" fp4-channels -f nvfp4 --weight w.npy a.npy
grep -q "2-D 16x16" out.txt || fail "te weights should use 2-D scaling"

# --device: a bad name is exit 2; cuda runs (and gives the CPU's bits) where a
# GPU is usable and the build has CUDA, else exit 2 naming the reason; auto
# always runs and gives the same output as cpu. --version lists cuda (and a
# gpu: line) only in a build with CUDA, and only for the tools with --device.
cuda_built=0
fp4-decompose --version | grep -q "^features:.* cuda" && cuda_built=1
for t in fp4-decompose fp4-channels; do
    expect 2 "device 'gpu': expected cpu, cuda or auto" $t --device gpu a.npy
    expect 0 "" $t --json a.npy
    cp out.txt cpu.json
    expect 0 "" $t --json --device auto a.npy
    cmp -s cpu.json out.txt || fail "$t --device auto: output differs from --device cpu"
    set +e
    $t --json --device cuda a.npy >out.txt 2>err.txt
    rc=$?
    set -e
    if [ "$rc" -eq 0 ]; then
        cmp -s cpu.json out.txt || fail "$t --device cuda: output differs from --device cpu"
    else
        [ "$rc" -eq 2 ] || fail "$t --device cuda without a GPU: exit $rc, expected 2"
        grep -q -- "--device cuda: " err.txt || fail "$t --device cuda: no reason given: $(cat err.txt)"
    fi
    $t --version >out.txt
    if [ "$cuda_built" -eq 1 ]; then grep -q "^gpu: " out.txt || fail "$t --version: no gpu line"; fi
done
# --keep: NVFP4 read once or twice, or auto (the default: twice where the
# input is in the page cache, else once), the same output bit for bit; over
# .npy (read on the worker threads) and HDF5 (one reader), with the file's
# pages in the page cache and dropped from it (where the kernel drops them);
# a partly kept input and which way auto decides are checked in
# test_decompose.c (source_keep_reads_nvfp4_once, source_keep_auto_by_page_cache)
"$PY" -c "import h5py, numpy as np; h5py.File('keep.h5', 'w')['x'] = np.load('a.npy')"
drop() { "$PY" -c "import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)" "$1"; }
for src in a.npy plain.h5:/x keep.h5:/x; do
    fp4-decompose -f nvfp4 --by row --json --chunk 1024 --keep 0 "$src" >twice.json
    for k in 2048 1 auto "auto cold" "2048 cold" default "default cold"; do
        case $k in *cold) drop "${src%%:*}" ;; esac
        case $k in default*) keep= ;; *) keep="--keep ${k% cold}" ;; esac
        fp4-decompose -f nvfp4 --by row --json --chunk 1024 $keep "$src" >once.json
        cmp -s twice.json once.json || fail "fp4-decompose ${keep:-(no --keep)} $src ($k): output differs from --keep 0"
    done
done
# on 4 or more threads the workers read each chunk of a .npy (reader.c), and
# NVFP4's kept rows with their amax: the same output as one reader thread
# (NaN and Inf too), a truncated file the same refusal
for x in a.npy nan.npy; do
    for f in mxfp4 nvfp4; do
        for by in row channel; do
            FP4S_THREADS=1 fp4-decompose -f $f --by $by --json --chunk 1024 $x >one.json
            FP4S_THREADS=4 fp4-decompose -f $f --by $by --json --chunk 1024 $x >four.json
            cmp -s one.json four.json || fail "fp4-decompose -f $f --by $by $x: 4 threads differ from 1"
        done
    done
done
expect 3 "trunc.npy" env FP4S_THREADS=4 fp4-decompose trunc.npy
# NVFP4 with the RHT on NaN and Inf: the tensor amax is the largest finite
# |x| of the rotated rows however the input is chunked, kept or read (it
# was each chunk's NaN or Inf amax folded, the largest finite value lost
# with its NaN chunk: the output moved with --chunk); without the RHT and
# 2-D the same (with an Inf, the chunks' Inf and the NaN chunk's 0 both gave
# S_enc 1); test_decompose.c compares it with the whole tensor's
"$PY" - <<'EOF'
import numpy as np
x = np.random.default_rng(8).standard_normal((64, 256)).astype(np.float32)
x[9, 5] = 30.0; x[9, 200] = np.nan; x[61, 3] = np.nan
np.save("rhtnan.npy", x)
x[33, 17] = np.inf; x[50, 64] = -np.inf
np.save("rhtinf.npy", x)
EOF
for x in rhtnan.npy rhtinf.npy; do
for f in "--rht te" "" "--2d"; do
    FP4S_THREADS=1 fp4-decompose -f nvfp4 $f --json $x >ref.json
    for th in 1 3 4; do
        for c in 1024 4096 8192 16384; do
            for k in 0 2048; do
                FP4S_THREADS=$th fp4-decompose -f nvfp4 $f --json --chunk $c --keep $k $x >got.json
                cmp -s ref.json got.json || fail "fp4-decompose -f nvfp4 $f --chunk $c --keep $k $x, $th threads: differs"
            done
        done
    done
done
done
for k in -1 abc lots "" " 1" 1M Auto; do
    expect 2 "--keep: expected auto or an integer in \[0, 1073741824\], got '$k'" fp4-decompose -f nvfp4 --keep "$k" a.npy
done
expect 2 "--keep: expected an integer in \[0, 1073741824\], got '1073741825'" fp4-decompose -f nvfp4 --keep 1073741825 a.npy

# ---- saturation under a static input scale, and the per-expert share -----------------
# A scale small enough that block scales clamp: every input's clamped blocks and
# clipped values against an independent count (TransformerEngine's arithmetic
# of the te profile in float32: S_enc = fl(1/input_scale), the unrounded block
# scale fl(amax_b * fl(S_enc * fl(1/6))) clamps where it exceeds 464; a value
# clips where |x * fl(1 / fl(s_b * S_dec))| > 6, s_b the E4M3 scale).
fp4-capture synth -o sat.h5 --seed 3 --layers 1 --experts 2 --top-k 1 --tokens 64 --hidden 64 \
    --out-features 32 --steps 3 --act-every 1 --f32 > /dev/null 2>&1 || fail "synth sat.h5"
expect 0 "" fp4-decompose -f nvfp4 -p te --input-scale 0.004 --sites '*' --sides trainer,rollout --json sat.h5
"$PY" - <<'EOF' || fail "fp4-decompose: saturation against numpy"
import json, h5py, numpy as np
d = json.load(open("out.txt"))
f32 = np.float32
sinv = f32(1) / f32(0.004)
mult = sinv * (f32(1) / f32(6))
def e4m3(v):  # round to nearest even onto E4M3 (v >= 0, saturating at 448)
    v = np.minimum(v.astype(np.float64), 448.0)
    e = np.floor(np.log2(np.maximum(v, 2.0 ** -6)))
    step = 2.0 ** (e - 3)
    return np.minimum(np.round(v / step) * step, 448.0).astype(np.float32)
tot_cl = tot_sat = 0
with h5py.File("sat.h5") as h:
    assert len(d["inputs"]) == 18
    for i in d["inputs"]:
        x = h["steps/%d/%s/%s" % (i["step"], i["site"], i["side"])][()].astype(np.float32)
        b = x.reshape(-1, 16)
        amax = np.abs(b).max(axis=1).astype(np.float32)
        sbf = amax * mult
        clamped = int((sbf > f32(464)).sum())
        enc = f32(1) / (e4m3(sbf) * f32(0.004))
        clipped = int((np.abs(b * enc[:, None]) > f32(6)).sum())
        s = i["summary"]
        assert s["scale_clamped"] == clamped and s["clipped"] == clipped, \
            (i["site"], i["step"], s["scale_clamped"], clamped, s["clipped"], clipped)
        tot_cl += clamped
        tot_sat += clipped
assert 0 < tot_cl < sum(i["summary"]["blocks"] for i in d["inputs"]), tot_cl
assert d["rollup"]["scale_clamped"] == tot_cl and d["rollup"]["clipped"] == tot_sat
# the per-expert share: of the error energy of every input of that side
for e in d["experts"]:
    side = sum(i["summary"]["energy_total"] for i in d["inputs"] if i["side"] == e["side"])
    assert abs(e["share"] - e["summary"]["energy_total"] / side) < 1e-12, e
    assert e["summary"]["scale_clamped"] == sum(i["summary"]["scale_clamped"] for i in d["inputs"]
        if i["side"] == e["side"] and ".experts.%d." % e["expert"] in i["site"]), e
EOF
expect 0 "" fp4-decompose -f nvfp4 -p te --input-scale 0.004 --sites '*' --sides rollout sat.h5
grep -q "^saturation per input (NVFP4 block scales clamped" out.txt || fail "saturation table"
grep -Eq "^ +2 layers.0.mlp.experts.1.up_proj +rollout +[0-9]+ +[1-9][0-9]* " out.txt || fail "saturation row"
grep -q "block scales clamped at 448 (unrounded scale > 464)" out.txt || fail "clamped line"
grep -A2 "^per expert" out.txt | grep -q " share " || fail "per-expert share column"
# without a static scale nothing clamps; MXFP4 reports clipped values only
expect 0 "" fp4-decompose -f nvfp4 -p te --sites '*' --sides rollout --json sat.h5
"$PY" -c "import json; d = json.load(open('out.txt')); assert d['rollup']['scale_clamped'] == 0" || fail "dynamic: clamped"
expect 0 "" fp4-decompose --sites '*' --sides rollout sat.h5
grep -q "^saturation per input (MXFP4: values clipped" out.txt || fail "MXFP4 saturation table"

# ---- the per-layer view: every input of a (layer, side) merged ----------------------
# Two layers of attention and experts, one site renamed so that it names no
# layer: each "layers" row against the per-input records of the same document
# (its inputs, the summed energies and counts, the ratios they make, the share
# of its side's ||e||^2), the rows in layer order with the unnamed ones last.
fp4-capture synth -o lay.h5 --seed 4 --layers 2 --experts 2 --top-k 1 --tokens 64 --hidden 64 \
    --out-features 32 --steps 2 --act-every 1 --f32 > /dev/null 2>&1 || fail "synth lay.h5"
"$PY" - <<'EOF2' || fail "rename a site of lay.h5"
import h5py
with h5py.File("lay.h5", "r+") as h:
    for s in h["steps"]:
        h.move("steps/%s/layers.1.self_attn.qkv_proj" % s, "steps/%s/lm_head" % s)
EOF2
expect 0 "" fp4-decompose -f nvfp4 -p te --input-scale 0.004 --sites '*' --sides trainer,rollout --json lay.h5
"$PY" - <<'EOF2' || fail "fp4-decompose: per-layer rows against the per-input records"
import json, math, re
d = json.load(open("out.txt"))
def layer(site):  # the capture writer's rule: a "layers.<n>" or "layer.<n>" component
    for key in ("layers", "layer"):
        m = re.search(r"(?:^|\.)%s\.(\d+)(?:\.|$)" % key, site)
        if m: return int(m.group(1))
    return None
groups = {}
for i in d["inputs"]:
    groups.setdefault((layer(i["site"]), i["side"]), []).append(i["summary"])
keys = sorted(groups, key=lambda k: (k[0] is None, k[0] if k[0] is not None else 0, k[1]))
assert [(r["layer"], r["side"]) for r in d["layers"]] == keys, [(r["layer"], r["side"]) for r in d["layers"]]
assert keys[-1][0] is None and {k[0] for k in keys} == {0, 1, None}, keys
side_e = {}
for i in d["inputs"]:
    side_e[i["side"]] = side_e.get(i["side"], 0) + i["summary"]["energy_total"]
close = lambda a, b: abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300)
for r in d["layers"]:
    ins, s = groups[(r["layer"], r["side"])], r["summary"]
    assert r["inputs"] == len(ins) == (6 if r["layer"] == 0 else 4 if r["layer"] == 1 else 2), r
    for k in ("n", "blocks", "deadzone", "clipped", "scale_clamped"):
        assert s[k] == sum(x[k] for x in ins), (r["layer"], r["side"], k)
    for k in ("energy_total", "energy_scale", "energy_deadzone", "energy_grid", "energy_x"):
        assert close(s[k], sum(x[k] for x in ins)), (r["layer"], r["side"], k)
    et = s["energy_total"]
    assert close(s["relative_error"], math.sqrt(et / s["energy_x"])), r
    for k in ("scale", "deadzone", "grid"):
        assert close(s["ratio_" + k], s["energy_" + k] / et), (r, k)
    assert close(s["deadzone_fraction"], s["deadzone"] / s["n"]), r
    assert close(r["share"], et / side_e[r["side"]]), r
assert sum(s["summary"]["scale_clamped"] for s in d["layers"]) == d["rollup"]["scale_clamped"] > 0
for side in ("trainer", "rollout"):
    assert close(sum(r["share"] for r in d["layers"] if r["side"] == side), 1.0), side
EOF2
expect 0 "" fp4-decompose -f nvfp4 --sites '*' --sides rollout lay.h5
grep -A3 "^per layer" out.txt | grep -Eq "^ +layer +side +inputs +n +rel.error +share +scale " ||
    fail "per-layer table header"
grep -Eq "^ +1 +rollout +4 " out.txt || fail "per-layer row of layer 1"
grep -Eq "^ +- +rollout +2 " out.txt || fail "per-layer row of the sites that name no layer"
# no site names a layer: no per-layer view
expect 0 "" fp4-decompose -f nvfp4 --sites 'lm_head' --sides rollout --json lay.h5
"$PY" -c "import json; assert 'layers' not in json.load(open('out.txt'))" || fail "layers without a layer"

fp4-plot --version | grep -q "^features:.* cuda" && fail "fp4-plot --version lists cuda (it has no GPU path)"
fp4-plot --version | grep -q "^gpu: " && fail "fp4-plot --version has a gpu line"

failures_end
echo "cli: all checks passed"
