# Shared by the capture shell tests (sourced). Sets T (temp dir, removed on
# exit), PY (a python3 with numpy and h5py), SRC (source root) and helpers.
set -eu
SRC=${FP4S_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$SRC/tests/python.sh"
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
