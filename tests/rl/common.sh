# Sourced by the fp4-rl shell tests: a temporary directory removed on exit and
# small assertion helpers.
SRC=${FP4S_SRCDIR:?FP4S_SRCDIR not set}
T=$(mktemp -d "${TMPDIR:-/tmp}/fp4s_rltest.XXXXXX")
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

expect_err() {
    grep -F -q -- "$1" err.txt || { cat err.txt >&2; fail "stderr lacks '$1'"; }
}
