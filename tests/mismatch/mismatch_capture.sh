#!/bin/sh
# Capture files (/steps/<step>/logprobs/...): numbers equal numpy on the
# float32 log-probs, the planted onset is found, --by-position uses pos.
set -eu
. "$FP4S_SRCDIR/tests/mismatch/common.sh"

$REF capture c.h5 --onset 20 --steps 40
fp4-mismatch --json c.h5 > c.json
$REF check c.h5 c.json || fail "capture metrics differ from numpy"
[ "$(jget c.json 'j["runs"][0]["onset"]["step"]')" = 100 ] || fail "capture onset (step 20 * 5)"
[ "$(jget c.json 'j["runs"][0]["name"]')" = c ] || fail "run name from the file"
fp4-mismatch --json --by-position --name cap c.h5 > p.json
$PY - p.json <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
r = j["runs"][0]
assert r["name"] == "cap"
for s in r["steps"]:
    assert s["first"]["tokens"] + s["rest"]["tokens"] == s["tokens"], s["step"]
    assert s["first"]["sequences"] <= 12 and s["first"]["tokens"] <= 12
PYEOF
# the shipped synthetic MoE capture plants its onset at step 8 (datasets/README.md)
fp4-mismatch --json --baseline-steps 5 --consecutive 3 "$SRC/datasets/synth-moe.h5" > s.json
[ "$(jget s.json 'j["runs"][0]["onset"]["step"]')" = 8 ] || fail "synth-moe.h5: onset not at step 8"
[ "$(jget s.json 'len(j["runs"][0]["steps"])')" = 12 ] || fail "synth-moe.h5: 12 steps"
$REF check "$SRC/datasets/synth-moe.h5" s.json || fail "synth-moe.h5 metrics differ from numpy"
echo ok
