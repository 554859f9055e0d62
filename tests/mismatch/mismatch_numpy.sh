#!/bin/sh
# fp4-mismatch equals an independent numpy computation of the frameworks'
# formulas on random traces (CSV, JSONL, TSV, --csv output, --is-cap).
set -eu
. "$FP4S_SRCDIR/tests/mismatch/common.sh"

$REF gen r.csv --seed 11 --steps 5 --seqs 12 --nan 6 --mask
fp4-mismatch --json r.csv > r.json
$REF check r.csv r.json || fail "metrics differ from numpy (CSV)"

fp4-mismatch --json --is-cap 3 r.csv > r3.json
$REF check r.csv r3.json --is-cap 3 || fail "metrics differ from numpy (--is-cap 3)"

# JSONL with the same rows (NaN written as null) gives the same numbers
$REF gen s.csv --seed 5 --steps 4 --nan 4
$REF gen s.jsonl --seed 5 --steps 4 --nan 4
fp4-mismatch --json s.jsonl > sj.json
$REF check s.csv sj.json || fail "metrics differ from numpy (JSONL)"

# TSV, delimiter found from the header, and --delim given explicitly
tr ',' '\t' < s.csv > s.tsv
fp4-mismatch --json s.tsv > st.json
$REF check s.csv st.json || fail "metrics differ from numpy (TSV)"
fp4-mismatch --json --delim tab --format csv - < s.tsv > st2.json
$REF check s.csv st2.json || fail "metrics differ from numpy (TSV on stdin)"

# --csv carries the same values as --json
fp4-mismatch --csv r.csv > r.out.csv
$PY - r.out.csv r.json <<'PYEOF'
import csv, json, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
j = json.load(open(sys.argv[2]))["runs"][0]["steps"]
assert len(rows) == len(j), (len(rows), len(j))
for r, s in zip(rows, j):
    assert int(r["step"]) == s["step"] and r["part"] == "all"
    for k, v in s.items():
        if k in ("step",):
            continue
        x = float(r[k])
        if v is None:
            assert math.isnan(x), k
        else:
            assert x == v or math.isclose(x, v, rel_tol=1e-15), (k, x, v)
PYEOF
echo "ok"
