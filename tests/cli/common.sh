# Shared by the fp4-quant CLI tests (sourced; POSIX sh).
# Gives: $T (a fresh temporary directory, removed on exit), $PY (a python3
# with numpy and h5py), fail MSG, expect_exit CODE CMD..., no_outputs_left.
T=$(mktemp -d "${TMPDIR:-/tmp}/fp4s_cli.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
cd "$T"

. "${FP4S_SRCDIR:?}/tests/python.sh"

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# sigdfl CMD...: exec CMD with SIGINT and SIGQUIT at their default actions
# (a background job of sh starts with them ignored, and the tools keep a
# signal ignored at start, as nohup needs).
sigdfl() {
    exec $PY -c 'import os, signal, sys
for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):
    signal.signal(s, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}

# expect_exit CODE CMD...: run CMD, stdout to out.txt, stderr to err.txt.
expect_exit() {
    want=$1
    shift
    set +e
    "$@" >out.txt 2>err.txt
    got=$?
    set -e
    if [ "$got" != "$want" ]; then
        echo "--- stdout" >&2; cat out.txt >&2
        echo "--- stderr" >&2; cat err.txt >&2
        fail "exit $got, expected $want: $*"
    fi
}

# err_has TEXT: stderr of the last expect_exit contains TEXT.
err_has() {
    grep -F -- "$1" err.txt >/dev/null || { cat err.txt >&2; fail "stderr lacks '$1'"; }
}

out_has() {
    grep -F -- "$1" out.txt >/dev/null || { cat out.txt >&2; fail "stdout lacks '$1'"; }
}

# no_outputs_left DIR: no file other than the inputs (*.in.*) and the logs.
no_outputs_left() {
    left=$(ls -A "$1" | grep -v -e '\.in\.' -e '^out\.txt$' -e '^err\.txt$' || true)
    [ -z "$left" ] || fail "files left behind in $1: $left"
}
