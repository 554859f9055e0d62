#!/bin/sh
# Bad input: clear message naming file, line/dataset and problem, documented
# exit status (2 usage, 3 input), and no output file left behind.
set -eu
. "$FP4S_SRCDIR/tests/mismatch/common.sh"

H=step,seq,trainer_logprob,rollout_logprob
bad() { # bad NAME CONTENT PATTERN [EXIT]
    printf '%b' "$2" > "$1"
    expect_exit "${4:-3}" fp4-mismatch --json -o out.json "$1"
    expect_err "$1"
    expect_err "$3"
    [ ! -e out.json ] || fail "$1: out.json written"
    [ -z "$(ls | grep 'out.json.tmp')" ] || fail "$1: temporary left"
}
bad nonnum.csv  "$H\n0,0,-1,-0.5\n0,1,x,-1\n" "line 3: column 'trainer_logprob': expected a number, got 'x'"
bad missing.csv "step,seq,trainer_logprob\n0,0,-1\n" "header: missing rollout log-prob column 'rollout_logprob'"
bad positive.csv "$H\n0,0,-1,-1\n0,0,-1,0.2\n" "line 3: rollout log-prob 0.2 is positive"
bad short.csv "$H\n0,0,-1\n" "line 2: 3 fields, the header has 4"
bad unsorted.csv "$H\n0,0,-1,-1\n1,0,-1,-1\n0,0,-1,-1\n" "rows must be grouped by step"
bad masked.csv "$H,mask\n0,0,-1,-1,0\n" "step 0: no counted token (1 masked"
bad nanstep.csv "$H\n0,0,nan,-1\n1,0,-1,-1\n" "step 0: no counted token (0 masked, 1 with NaN/Inf"
bad empty.csv "" "empty trace"
bad bad.jsonl '{"step":0,"seq":0,"trainer_logprob":"abc","rollout_logprob":-1}\n' "line 1: field 'trainer_logprob': expected a number"
bad mask.csv "$H,mask\n0,0,-1,-1,2\n" "column 'mask': expected 0, 1, true or false, got '2'"
expect_exit 3 fp4-mismatch nosuch.csv
expect_err "nosuch.csv: cannot open"

# positive log-probs pass with --allow-positive; NaN tokens are counted, not fatal
printf "$H\n0,0,-1,0.2\n0,0,nan,-1\n0,1,-1,-1\n" > ok.csv
expect_exit 0 fp4-mismatch --json --allow-positive -o ok.json ok.csv
[ "$(jget ok.json 'j["runs"][0]["steps"][0]["nonfinite"]')" = 1 ] || fail "nonfinite count"
[ "$(jget ok.json 'j["runs"][0]["steps"][0]["tokens"]')" = 2 ] || fail "token count"
# an empty step is skipped with --skip-empty
expect_exit 0 fp4-mismatch --json --skip-empty -o sk.json masked.csv nanstep.csv
[ "$(jget sk.json 'j["runs"][1]["summary"]["skipped_steps"]')" = 1 ] || fail "skipped steps"

# capture files: unequal trainer/rollout lengths and an empty step
$PY - <<'PYEOF'
import h5py, numpy as np
for name, n_r, empty in (("unequal.h5", 7, False), ("emptystep.h5", 8, True)):
    with h5py.File(name, "w") as f:
        f.attrs["fp4scope_schema"] = "fp4scope-capture/1"
        for s in (0, 1):
            g = f.create_group("steps/%d/logprobs" % s)
            n = 0 if (empty and s == 1) else 8
            g["trainer"] = -np.ones(n, np.float32)
            g["rollout"] = -np.ones(n if s == 0 else min(n, n_r), np.float32)
            g["seq"] = np.zeros(n, np.int64)
PYEOF
expect_exit 3 fp4-mismatch -o out.json unequal.h5
expect_err "unequal.h5: /steps/1/logprobs: rollout has 7 tokens but trainer has 8"
expect_exit 3 fp4-mismatch -o out.json emptystep.h5
expect_err "emptystep.h5: /steps/1/logprobs: empty step (0 tokens"
[ ! -e out.json ] || fail "out.json written for a bad capture"

# usage errors: exit 2
expect_exit 2 fp4-mismatch --metric nope ok.csv
expect_err "unknown metric 'nope'"
expect_exit 2 fp4-mismatch --is-cap 0.5 ok.csv
expect_err "--is-cap"
expect_exit 2 fp4-mismatch --every 0 ok.csv
expect_exit 2 fp4-mismatch
expect_exit 2 fp4-mismatch --json --csv ok.csv
expect_exit 2 fp4-mismatch --allow-positive ok.csv ok.csv
expect_err "two runs are named 'ok'"
expect_exit 0 fp4-mismatch --help
grep -q "^Usage: fp4-mismatch" out.txt || fail "--help"
expect_exit 0 fp4-mismatch --version
grep -q "fp4-mismatch (fp4scope)" out.txt || fail "--version"
echo ok
