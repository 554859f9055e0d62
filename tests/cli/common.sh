# Shared by the fp4-quant CLI tests (sourced; POSIX sh).
# Gives: tests/lib.sh's $T (the working directory, removed on exit), fail MSG,
# expect_exit CODE CMD..., expect_err TEXT; $PY (a python3 with numpy and
# h5py); sigdfl, err_has, out_has and no_outputs_left.
. "${FP4S_SRCDIR:?}/tests/lib.sh"
. "$FP4S_SRCDIR/tests/python.sh"

# sigdfl CMD...: exec CMD with SIGINT and SIGQUIT at their default actions
# (a background job of sh starts with them ignored, and the tools keep a
# signal ignored at start, as nohup needs).
sigdfl() {
    exec $PY -c 'import os, signal, sys
for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):
    signal.signal(s, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}

# err_has TEXT: stderr of the last expect_exit contains TEXT.
err_has() { expect_err "$1"; }

out_has() {
    grep -F -- "$1" out.txt >/dev/null || { cat out.txt >&2; fail "stdout lacks '$1'"; }
}

# no_outputs_left DIR: no file other than the inputs (*.in.*) and the logs.
no_outputs_left() {
    left=$(ls -A "$1" | grep -v -e '\.in\.' -e '^out\.txt$' -e '^err\.txt$' || true)
    [ -z "$left" ] || fail "files left behind in $1: $left"
}
