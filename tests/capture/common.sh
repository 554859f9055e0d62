# Shared by the capture shell tests (sourced). Sets T (temp dir, removed on
# exit), PY (a python3 with numpy and h5py), SRC (source root) and helpers.
set -eu
SRC=${FP4S_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
PY=
for p in /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy, h5py' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then echo "FAIL: no python3 with numpy and h5py (python3-numpy, python3-h5py)"; exit 1; fi
fail() { echo "FAIL: $*"; exit 1; }
# expect CODE PATTERN CMD...: run CMD, check its exit status and that stderr matches PATTERN
expect() {
    code=$1; pat=$2; shift 2
    set +e
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    set -e
    [ "$rc" = "$code" ] || { cat "$T/err"; fail "$* exited $rc, expected $code"; }
    if [ -n "$pat" ]; then grep -q -- "$pat" "$T/err" || { cat "$T/err"; fail "$*: stderr lacks '$pat'"; }; fi
}
