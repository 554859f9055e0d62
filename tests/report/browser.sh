#!/bin/sh
# The report in a real browser: headless Chromium renders index.html of
# fp4-report --demo, and the screenshot must not be blank (much of it drawn,
# many colours: text, tables and figures). Skipped (77) without chromium or
# python3 (the PNG is read by png_stats.py, standard library only).
set -eu
SRC=${FP4S_SRCDIR:?}
CHROME=""
for c in chromium chromium-browser google-chrome; do
    if command -v "$c" >/dev/null 2>&1; then CHROME=$c; break; fi
done
[ -n "$CHROME" ] || { echo "browser: chromium not installed (Debian: apt-get install chromium): skipped"; exit 77; }
# the tests' python (meson's FP4S_PYTHON), else any python3 (png_stats.py needs no module)
PY3=${FP4S_PYTHON:-$(command -v python3 || true)}
[ -n "$PY3" ] || { echo "browser: no python3 to read the screenshot: skipped"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
fp4-report --demo -o rep > out.txt 2> err.txt || { cat err.txt >&2; echo "FAIL: fp4-report --demo"; exit 1; }
# a profile of its own (no user settings), no sandbox (containers), no GPU
HOME="$T" timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$T/profile" --window-size=1280,2400 --screenshot="$T/shot.png" \
    "file://$T/rep/index.html" > chrome.log 2>&1 || { cat chrome.log >&2; echo "FAIL: $CHROME failed"; exit 1; }
[ -s shot.png ] || { cat chrome.log >&2; echo "FAIL: no screenshot"; exit 1; }
set -- $("$PY3" "$SRC/tests/report/png_stats.py" shot.png)
echo "screenshot: ${1}x${2}, ink $3, $4 colours"
[ "$1" -eq 1280 ] && [ "$2" -eq 2400 ] || { echo "FAIL: screenshot size ${1}x${2}"; exit 1; }
# a blank or unstyled page has almost no ink and a handful of colours; the report's top has the
# summary box, a table with shaded cells and the profiles figure
"$PY3" -c "import sys; sys.exit(0 if float('$3') > 0.05 and int('$4') > 200 else 1)" ||
    { echo "FAIL: the page looks blank (ink $3, $4 colours)"; exit 1; }
echo "browser ok"
