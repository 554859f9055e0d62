#!/bin/sh
# Suite slow: the commands of fp4-remedy(1) WHAT THE SHIPPED DATA SHOWS run on
# the shipped captures (each must exit 0 and print its pooled table), and a few
# of the numbers that section quotes are read back from their output, so the
# page says what the code computes.
set -eu
. "${FP4S_SRCDIR:?}/tests/python.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
sed -n '/^\.SH WHAT THE SHIPPED DATA SHOWS/,/^\.SH /p' "$FP4S_SRCDIR/man/fp4-remedy.1" |
    sed -n '/^\.nf/,/^\.fi/p' | grep -v '^\.\(nf\|fi\)' | sed 's/\\-/-/g; s/^ *//' > "$T/cmds.txt"
[ -s "$T/cmds.txt" ] || { echo "findings: no commands in the section" >&2; exit 1; }
cd "$FP4S_SRCDIR"
n=0
while IFS= read -r line; do
    case "$line" in
    L=*) eval "$line" ;;
    fp4-*)
        n=$((n + 1))
        cmd=${line%% | tail*}   # the whole output, not its tail
        if ! eval "$cmd" > "$T/out$n.txt" 2> "$T/err.txt"; then
            echo "FAIL: $cmd" >&2
            cat "$T/err.txt" >&2
            exit 1
        fi
        grep -q '^all [0-9]* (step, site) pairs' "$T/out$n.txt" || { echo "FAIL: no pooled table: $cmd" >&2; exit 1; }
        echo "ok: $cmd" ;;
    *) echo "findings: unexpected line: $line" >&2; exit 1 ;;
    esac
done < "$T/cmds.txt"
[ "$n" -eq 6 ] || { echo "findings: $n commands, expected 6" >&2; exit 1; }
# out1..out4: fp4-remedy on moe-h200 (nvfp4, mxfp4) and synth-moe (nvfp4, mxfp4); out5, out6: fp4-compare
"$PY" - "$T" <<'PYEOF'
import re, sys
t = sys.argv[1]
def pooled(i):
    rows, on = {}, False
    for line in open("%s/out%d.txt" % (t, i)):
        if line.startswith("all "):
            on = True
        elif on and line.split() and line.split()[0] not in ("remedy", "error", "activation"):
            f = line.split()
            rows[f[0]] = [float(v) if re.match(r"^-?[0-9.]+(e[-+]?[0-9]+)?$", v) else v for v in f[1:]]
    return rows
# remedy: (out_err, vs_wfq, vs_w4a4) as fp4-remedy(1) quotes them (3 digits)
want = {
    1: {"none": (0.145, 0.093, 0.039), "rac:0.25": (None, 0.068, 0.071), "rac:1": (None, 0.023, None),
        "rac-rand:0.25": (None, 0.080, None), "of:0.5": (0.074, None, None), "of:1": (0.026, None, None),
        "keep:1": (0.113, 0.042, None), "4over6": (0.137, None, None), "4over6:mse": (0.136, None, None),
        "rht": (0.156, None, None), "sr": (0.206, None, None), "mbs:128": (0.135, None, None)},
    2: {"none": (0.222, 0.165, 0.047), "rac:0.25": (None, 0.102, None), "rac-rand:0.25": (None, 0.130, None),
        "of:0.5": (0.121, None, None), "of:1": (0.036, None, None), "mbs:128": (0.174, None, None),
        "mbs:128:mse": (0.156, None, None), "rht": (0.161, None, None), "sr": (0.266, None, None)},
    3: {"none": (0.139, 0.048, 0.004), "rac:0.25": (None, 0.017, None), "rac-rand:0.25": (None, 0.042, None),
        "4over6": (0.139, 0.045, None), "rht": (0.139, None, None)},
    4: {"rht": (0.163, None, None), "none": (0.191, None, None)},
}
bad = 0
for i, rows in want.items():
    got = pooled(i)
    for item, vals in rows.items():
        for col, v in enumerate(vals):
            if v is None:
                continue
            g = got.get(item, [None] * 3)[col]
            if not isinstance(g, float) or abs(g - v) > 0.0011:
                print("FAIL out%d %s column %d: %r, the page says %g" % (i, item, col, g, v))
                bad += 1
# compare: the pooled split (NVFP4 dead zone 40%, grid 39%; MXFP4 scale 72%)
for i, comp, v in ((5, "deadzone", 40), (5, "grid", 39), (6, "scale", 72), (6, "deadzone", 20)):
    line = [l for l in open("%s/out%d.txt" % (t, i)) if l.startswith("all ")][0]
    g = float(re.search(comp + r" ([-0-9.]+)%", line).group(1))
    if abs(g - v) > 0.6:
        print("FAIL out%d %s: %g%%, the page says %d%%" % (i, comp, g, v))
        bad += 1
print("%d numbers of the page differ from the output" % bad)
sys.exit(1 if bad else 0)
PYEOF
