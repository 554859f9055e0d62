#!/bin/sh
# fp4-report: what the report holds (every table's CSV, every figure's image,
# script and data, every link of every page), HTML escaping of the names that
# come from a file, and the output safety of the report directory: refusals
# before any work, --force only over a report, all or none on a failure or a
# signal, the earlier report kept when a replacement fails.
. "${FP4S_SRCDIR:?}/tests/lib.sh" # SRC, T, fail, expect_exit STATUS CMD... (stderr in err.txt)
tiny="$SRC/datasets/synth-tiny.h5"
fast="--drill 0 --profiles ceil --remedy none,rac:0.25"
no_staging() { ls -A "${1:-.}" | grep -q '^\.' && fail "a staging directory was left: $(ls -A "${1:-.}")" || true; }

# ---- a whole report: its files and links --------------------------------------------
expect_exit 0 fp4-report "$tiny" --trace "$SRC/datasets/traces/planted.csv" --drill 1 --top 3 -o rep
[ "$(cat out.txt)" = "rep/index.html" ] || fail "stdout is not the path of index.html: $(cat out.txt)"
grep -q '\[1/5\]' err.txt || fail "no progress on stderr"
[ -s rep/index.html ] && [ -s rep/fp4-report.json ] || fail "index.html or the manifest is missing"
grep -qi '<script' rep/index.html && fail "the page has a script element"
# every id once per page (the table of contents links to the sections' ids)
for page in $(find rep -name '*.html'); do
    d=$(grep -o 'id="[^"]*"' "$page" | sort | uniq -d)
    [ -z "$d" ] || fail "$page: ids used twice: $d"
    # well-formed: libxml2's HTML parser finds nothing but the HTML5 elements it does not know
    if command -v xmllint > /dev/null 2>&1; then
        e=$(xmllint --html --noout "$page" 2>&1 | grep ' error : ' |
            grep -v 'Tag \(main\|nav\|figure\|figcaption\|wbr\) invalid' || true)
        [ -z "$e" ] || fail "$page: $e"
    fi
done
for page in $(find rep -name '*.html'); do
    dir=$(dirname "$page")
    # every link and image of the page names a file of the report
    for ref in $(grep -o 'href="[^"#]*"\|src="[^"]*"' "$page" | sed 's/^[a-z]*="//; s/"$//'); do
        [ -e "$dir/$ref" ] || fail "$page links $ref, which is missing"
    done
done
for csv in sites decomposition profiles profiles-all channels channels-sites compare compare-sites remedies \
           remedies-all mismatch mismatch-steps; do
    [ -s "rep/$csv.csv" ] || fail "$csv.csv missing"
    grep -q "href=\"$csv.csv\"" rep/index.html || fail "the page does not link $csv.csv"
done
# every table row of the CSV: the header's column count in each line (no quoted commas here)
awk -F, 'NR == 1 { n = NF } NF != n { exit 1 }' rep/decomposition.csv || fail "decomposition.csv: ragged rows"
[ "$(wc -l < rep/decomposition.csv)" -eq 13 ] || fail "decomposition.csv: expected 12 (step, site) rows"
grep -q '^mismatch_rel\|,mismatch_rel,' rep/compare.csv || fail "compare.csv has no mismatch_rel column"
# every figure: image (when gnuplot is there), script, and the data files the script reads
drawn=0
grep -Eq '"figures_not_drawn": 0(,|$)' rep/fp4-report.json && drawn=1
[ "$drawn" -eq 1 ] || echo "note: built without gnuplot: the images are not checked"
for gp in rep/*.gp rep/sites/*/*.gp; do
    stem=${gp%.gp}
    [ "$drawn" -eq 0 ] || head -c 8 "$stem.png" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a" ||
        fail "$stem.png is not a PNG"
    for dat in $(grep -o "'[^']*\.dat'" "$gp" | tr -d "'" | sort -u); do
        [ -s "$(dirname "$gp")/$dat" ] || fail "$gp reads $dat, which is missing"
    done
    if command -v gnuplot > /dev/null 2>&1; then
        (cd "$(dirname "$gp")" && gnuplot -e "outfile='/dev/null'" "$(basename "$gp")") || fail "$gp does not redraw"
    fi
done
ls rep/sites/*/block-*.html > /dev/null || fail "no block pages"
ls rep/sites/*/channel-*.html > /dev/null || fail "no channel pages"
grep -q 'onset of divergence at step <b>50</b>' rep/index.html || fail "the planted onset at step 50 is not in the summary"
grep -q '"tool": "fp4-report"' rep/fp4-report.json || fail "manifest"
no_staging

# ---- two captures: each site named with its capture, each capture's log-probs a run
expect_exit 0 env FP4S_GNUPLOT=/nonexistent fp4-report "$tiny" "$SRC/datasets/synth-dense-f32.h5" $fast -o two
grep -q '^synth-tiny.h5: layers.0.self_attn.qkv_proj,' two/sites.csv || fail "two captures: no tiny site"
grep -q '^synth-dense-f32.h5: layers.0.self_attn.qkv_proj,' two/sites.csv || fail "two captures: no dense site"
[ "$(grep -c '^synth-' two/mismatch.csv)" -eq 2 ] || fail "two captures: expected two mismatch runs"

# ---- a site whose K is not a multiple of the block size is left out, and said so
h="{'descr': '<f4', 'fortran_order': False, 'shape': (8, 40), }"
{ printf '\223NUMPY\001\000\166\000'; printf '%-117s\n' "$h"; head -c 1280 /dev/zero; } > k40.npy
fp4-capture import "$SRC/datasets/weight-small.npy" -o k.h5 --step 0 --side rollout --site good.q_proj > /dev/null
fp4-capture import k40.npy -o k.h5 -a --step 0 --side rollout --site odd.k_proj > /dev/null
expect_exit 0 env FP4S_GNUPLOT=/nonexistent fp4-report k.h5 $fast -o krep
grep -q 'odd.k_proj left out: K = 40' err.txt || fail "no note for the site left out"
grep -q 'Left out</b>' krep/index.html || fail "the page does not list the site left out"
fp4-capture import k40.npy -o konly.h5 --step 0 --side rollout --site odd.k_proj > /dev/null
expect_exit 3 env FP4S_GNUPLOT=/nonexistent fp4-report konly.h5 $fast -o krep2
[ ! -e krep2 ] || fail "krep2 written"

# ---- a per-step scalar log (verl's JSONL) without the default metric: said, and no empty figure
# the tests' python (meson's FP4S_PYTHON), else any python3 (the script needs no module)
PY3=${FP4S_PYTHON:-$(command -v python3 || true)}
if [ -n "$PY3" ]; then
    fp4-mismatch --json --names verl "$SRC/datasets/traces/planted.csv" > pl.json
    "$PY3" "$SRC/tests/mismatch/make_verl_log.py" pl.json verl.jsonl nvfp4
    expect_exit 0 fp4-report k.h5 --trace verl.jsonl $fast -o vrep
    grep -q 'run <b>verl</b> (mean_abs, 80 steps): it has no value of this metric' vrep/index.html ||
        fail "no word on the scalar log without mean_abs"
    [ ! -e vrep/mismatch.gp ] || fail "a mismatch figure without a run to plot"
    expect_exit 0 fp4-report k.h5 --trace verl.jsonl --metric rollout_corr/k3_kl $fast -o vrep2
    grep -q 'onset of divergence at step <b>50</b>' vrep2/index.html || fail "verl's k3_kl: no onset at 50"
else
    echo "note: no python3: the verl scalar-log case is not checked"
fi

# ---- names from the file are escaped ------------------------------------------------------
site='evil<img src=x onerror=alert(1)>&"'"'"'.q_proj'
w="$SRC/datasets/weight-small.npy"
fp4-capture import "$w" -o evil.h5 --step 0 --side rollout --site "$site" > /dev/null
fp4-capture import "$w" -o evil.h5 -a --step 0 --side trainer --site "$site" > /dev/null
fp4-capture import "$w" -o evil.h5 -a --const --side weight --site "$site" > /dev/null
expect_exit 0 env FP4S_GNUPLOT=/nonexistent fp4-report evil.h5 --drill 1 --top 1 --profiles ceil --remedy none -o evilrep
for page in $(find evilrep -name '*.html'); do
    if grep -q '<img src=x' "$page"; then fail "$page: a site name was not escaped"; fi
done
grep -q 'evil&lt;img src=x onerror=alert(1)&gt;&amp;&quot;&#39;.<wbr>q_<wbr>proj' evilrep/index.html ||
    fail "the escaped site name is not on the page"
grep -q '"evil<img src=x onerror=alert(1)>&""' evilrep/sites.csv || fail "the CSV does not quote the name"
grep -q 'Figure not drawn' evilrep/index.html || fail "without gnuplot the page does not say so"
[ -s evilrep/components.gp ] && [ ! -e evilrep/components.png ] || fail "without gnuplot: script but no image expected"
grep -q 'gnuplot not found' err.txt || fail "without gnuplot: no note on stderr"
# a name with backquotes: gnuplot runs `...` inside double-quoted strings as a shell command,
# so the labels of fp4-report's and fp4-plot's scripts must escape them
site2='bq`touch pwned`.k_proj'
fp4-capture import "$w" -o bq.h5 --step 0 --side rollout --site "$site2" > /dev/null
fp4-capture import "$w" -o bq.h5 -a --step 0 --side trainer --site "$site2" > /dev/null
fp4-capture import "$w" -o bq.h5 -a --const --side weight --site "$site2" > /dev/null
expect_exit 0 fp4-report bq.h5 --drill 1 --top 1 --profiles ceil --remedy none -o bqrep
fp4-decompose --sites '*' bq.h5 --json > bq.json
mkdir bqplot
expect_exit 0 fp4-plot components bq.json -o bqplot/c.png
expect_exit 0 fp4-plot hist bq.json -o bqplot/h.png
[ -z "$(find . -name pwned)" ] || fail "a backquoted site name ran a shell command through gnuplot"
grep -q 'bq\\`touch pwned\\`' bqrep/*.gp || fail "the site name is not in the figures' scripts"

# ---- output safety ---------------------------------------------------------------------------
G="env FP4S_GNUPLOT=/nonexistent"
# an existing report: refused without --force, replaced with it (its old files gone)
expect_exit 2 $G fp4-report "$tiny" $fast -o rep
grep -q -- '--force' err.txt || fail "the refusal does not name --force"
ls rep/sites/*/index.html > /dev/null || fail "the refused run changed the report"
touch rep/stale.txt
expect_exit 0 $G fp4-report "$tiny" $fast -o rep --force
[ ! -e rep/stale.txt ] && [ ! -e rep/sites ] || fail "--force left files of the earlier report"
no_staging
# a directory that is not a report: refused even with --force, untouched
mkdir mine && echo data > mine/notes.txt
expect_exit 2 $G fp4-report "$tiny" $fast -o mine --force
grep -q 'not a report' err.txt || fail "no reason for refusing mine/"
[ "$(cat mine/notes.txt)" = data ] || fail "mine/notes.txt was touched"
# an empty directory is fine
mkdir empty
expect_exit 0 $G fp4-report "$tiny" $fast -o empty
[ -s empty/index.html ] || fail "no report in the empty directory"
# a report directory that holds an input: refused, input intact
mkdir -p holds && cp "$tiny" holds/cap.h5 && cp rep/fp4-report.json holds/
expect_exit 2 $G fp4-report holds/cap.h5 $fast -o holds --force
grep -q 'holds the input' err.txt || fail "no reason for refusing holds/"
cmp -s holds/cap.h5 "$tiny" || fail "the input was changed"
expect_exit 2 $G fp4-report "$tiny" $fast --trace holds/cap.h5 -o holds --force
# a file, a symbolic link, a missing parent
echo x > afile
expect_exit 2 $G fp4-report "$tiny" $fast -o afile --force
[ "$(cat afile)" = x ] || fail "afile was replaced"
ln -s rep alink
expect_exit 2 $G fp4-report "$tiny" $fast -o alink --force
expect_exit 4 $G fp4-report "$tiny" $fast -o no/such/dir
no_staging
# bad input and usage: the documented status, no report, no staging directory
echo "not hdf5" > bad.h5
expect_exit 3 $G fp4-report bad.h5 $fast -o r3
grep -q 'bad.h5' err.txt || fail "the message does not name the file"
expect_exit 3 $G fp4-report missing.h5 $fast -o r3
expect_exit 3 $G fp4-report "$tiny" $fast --sites 'nothing.*' -o r3
expect_exit 3 $G fp4-report "$tiny" $fast --trace bad.h5 -o r3
expect_exit 2 $G fp4-report "$tiny" --remedy 'rac:7' -o r3
expect_exit 2 $G fp4-report "$tiny" $fast --metric no_such_metric -o r3
expect_exit 2 $G fp4-report --demo "$tiny" -o r3
expect_exit 2 $G fp4-report -o r3
expect_exit 2 $G fp4-report "$tiny" --profiles nosuch -o r3
expect_exit 2 $G fp4-report "$tiny" --bogus -o r3
[ ! -e r3 ] || fail "a failed run left r3"
no_staging
# gnuplot failing on a figure: exit 4, nothing written, and the earlier report kept
cp -r rep rep.before
expect_exit 4 env FP4S_GNUPLOT=/bin/false fp4-report "$tiny" $fast -o rep --force
diff -r rep rep.before > /dev/null || fail "a failed --force run changed the earlier report"
expect_exit 4 env FP4S_GNUPLOT=/bin/false fp4-report "$tiny" $fast -o r4
[ ! -e r4 ] || fail "a gnuplot failure left r4"
no_staging
# a signal during the run: nothing appears, the staging directory is removed
# (a background job of a script ignores SIGINT, so SIGTERM and SIGHUP; the stand-in
# gnuplot records its pid so that it is ended too)
cat > slowplot <<EOF
#!/bin/sh
echo \$\$ >> "$T/slow.pids"
exec sleep 30
EOF
chmod +x slowplot
for sig in TERM HUP; do
    FP4S_GNUPLOT="$T/slowplot" fp4-report "$tiny" $fast -o r5 > /dev/null 2>&1 &
    pid=$!
    # killed while it waits for the first figure: the staging directory holds files then
    n0=$(cat slow.pids 2>/dev/null | wc -l)
    i=0
    while [ "$(cat slow.pids 2>/dev/null | wc -l)" -le "$n0" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    [ -n "$(ls -A . | grep '^\.r5\.')" ] || fail "SIG$sig: no staging directory while the run draws"
    kill -s "$sig" "$pid"
    set +e; wait "$pid"; st=$?; set -e
    [ "$st" -ne 0 ] || fail "SIG$sig: the run ended with status 0"
    [ ! -e r5 ] || fail "SIG$sig left r5"
    no_staging
done
for p in $(cat slow.pids); do kill "$p" 2>/dev/null || true; done
# the summary's naive W4A4 is the plain item, wherever it stands and whatever follows it
for l in none,rht rht,none; do
    expect_exit 0 fp4-report "$tiny" --steps 0 --drill 0 --profiles ceil --remedy $l -o "rn.$l"
    grep -o 'naive W4A4 leaves an output error of [^ ]*' "rn.$l/index.html" > "rn.$l.txt" ||
        fail "--remedy $l: no naive W4A4 in the summary"
done
cmp -s rn.none,rht.txt rn.rht,none.txt ||
    fail "the summary's naive W4A4 depends on the order: $(cat rn.none,rht.txt) / $(cat rn.rht,none.txt)"
echo "fp4-report cli ok"
