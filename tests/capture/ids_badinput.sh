#!/bin/sh
# Malformed token ids: a side holding an id twice, ids that do not number its
# rows, ids of the wrong type. fp4-capture ls --check fails naming the file,
# the dataset and the problem; fp4-compare leaves the site out with that
# message (exit 3 when nothing is left) and, --strict, refuses with exit 3,
# writing nothing; fp4-remedy and fp4-report the same.
. "$(dirname "$0")/common.sh"
command -v fp4-compare >/dev/null 2>&1 || { echo "SKIP: fp4-compare not built (no BLAS)"; exit 77; }
cd "$T"
"$PY" - <<'PYEOF'
import h5py, numpy as np, subprocess
def cap(name, tids, rids, tdtype=np.int64):
    subprocess.run(["fp4-capture", "synth", "-o", name, "--steps", "1", "--act-every", "1", "--layers", "1",
                    "--experts", "0", "--tokens", "4", "--hidden", "32", "--out-features", "8", "--f32",
                    "--gzip", "0"], check=True, capture_output=True)
    with h5py.File(name, "r+") as f:
        site = [s for s in f["/steps/0"] if s != "logprobs"][0]
        g = f["/steps/0/" + site]
        g.create_dataset("trainer_ids", data=np.asarray(tids, dtype=tdtype))
        g.create_dataset("rollout_ids", data=np.asarray(rids, dtype=np.int64))
    return site
ok = [[0, 0], [0, 1], [0, 2], [0, 3]]
open("site.txt", "w").write(cap("rep.h5", [[0, 0], [0, 1], [0, 1], [0, 3]], ok))
cap("short.h5", ok[:3], ok)
cap("int32.h5", ok, ok, np.int32)
PYEOF
site=$(cat site.txt)
expect 1 "rep.h5: /steps/0/$site/trainer_ids: token id (sequence 0, position 1) on rows 1 and 2" \
    fp4-capture ls --check rep.h5
expect 1 "short.h5: /steps/0/$site/trainer_ids: 3 token ids for the 4 rows" fp4-capture ls --check short.h5
expect 1 "int32.h5: /steps/0/$site/trainer_ids: token ids must be int64" fp4-capture ls --check int32.h5
for c in rep short int32; do
    # the other site is compared, the damaged one left out and named
    expect 0 "left out: $c.h5: /steps/0/$site/trainer_ids" fp4-compare -f nvfp4 -p te $c.h5 -o $c.json
    [ -s $c.json ] && rm $c.json
    expect 3 "no site left to analyse" fp4-compare -f nvfp4 -p te --sites "$site" $c.h5 -o $c.json
    expect 3 "$c.h5: /steps/0/$site/trainer_ids" fp4-compare -f nvfp4 -p te --strict $c.h5 -o $c.json
    [ ! -e $c.json ] || fail "$c: an output was written"
done
# fp4-remedy and fp4-report alike: the damaged site left out and named, or with --strict exit 3
expect 0 "left out: rep.h5: /steps/0/$site/trainer_ids" fp4-remedy -f nvfp4 -p te -r none,mbs:64 rep.h5
expect 3 "rep.h5: /steps/0/$site/trainer_ids" fp4-remedy -f nvfp4 -p te -r none,mbs:64 --strict rep.h5 -o r.json
[ ! -e r.json ] || fail "fp4-remedy --strict: an output was written"
expect 0 "left out: rep.h5: /steps/0/$site/trainer_ids" fp4-report -f nvfp4 -p te -r none --quiet -o rep rep.h5
expect 3 "rep.h5: /steps/0/$site/trainer_ids" fp4-report -f nvfp4 -p te -r none --quiet --strict -o rep2 rep.h5
[ ! -e rep2 ] || fail "fp4-report --strict: an output was written"
echo ok
