# Sourced by the mismatch shell tests: a python3 with numpy, a temporary
# directory removed on exit, and small assertion helpers.
. "${FP4S_SRCDIR:?}/tests/python.sh"
SRC=${FP4S_SRCDIR:?FP4S_SRCDIR not set}
REF="$PY $SRC/tests/mismatch/ref_mismatch.py"
T=$(mktemp -d "${TMPDIR:-/tmp}/fp4s_mmtest.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
cd "$T"

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_exit CODE CMD... : run CMD, check its exit status, keep stderr in err.txt
expect_exit() {
    want=$1; shift
    set +e
    "$@" >out.txt 2>err.txt
    got=$?
    set -e
    [ "$got" = "$want" ] || { cat err.txt >&2; fail "'$*' exited $got, expected $want"; }
}

# expect_err PATTERN : err.txt must contain the fixed string
expect_err() {
    grep -F -q -- "$1" err.txt || { cat err.txt >&2; fail "stderr lacks '$1'"; }
}

# jq-like field check with python: jget FILE EXPR (EXPR uses j)
jget() { $PY -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }
