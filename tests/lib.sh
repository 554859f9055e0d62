# Sourced by the shell tests (POSIX sh): what their preludes shared.
#   SRC                  the source tree (FP4S_SRCDIR)
#   T                    a fresh temporary directory, the working directory,
#                        removed on exit (and on SIGINT or SIGTERM)
#   fail MSG             "FAIL: MSG" on stderr and exit 1; after
#                        count_failures it counts instead (in fails) and the
#                        test goes on, and failures_end exits 1 if any
#   expect CODE PAT CMD...  run CMD with stdout in out.txt and stderr in
#                        err.txt; its exit status must be CODE and, unless PAT
#                        is empty, its stderr must match the grep pattern PAT
#   expect_exit CODE CMD...  the same without a pattern
#   expect_err TEXT      err.txt (of the last expect) holds the fixed string TEXT
#   man_examples PAGE    the commands of the EXAMPLES section of man/PAGE, one a
#                        line: the lines starting with fp4- inside .nf/.fi or
#                        .EX/.EE, roff's \- read as -
#   run_man_examples PAGE...  run each page's examples in order (sh -c, here):
#                        each must exit 0 and print something; n counts them
# Python is not needed here: a test that needs it sources tests/python.sh too.
set -eu
SRC=${FP4S_SRCDIR:?FP4S_SRCDIR not set}
T=$(mktemp -d "${TMPDIR:-/tmp}/fp4s_test.XXXXXX")
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cd "$T"

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

fails=0
count_failures() {
    fail() {
        echo "FAIL: $*" >&2
        fails=$((fails + 1))
    }
}
failures_end() {
    [ "$fails" -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
}

expect() {
    want=$1 pat=$2
    shift 2
    set +e
    "$@" > out.txt 2> err.txt
    got=$?
    set -e
    if [ "$got" != "$want" ]; then
        cat err.txt >&2
        fail "'$*' exited $got, expected $want"
    elif [ -n "$pat" ] && ! grep -q -- "$pat" err.txt; then
        cat err.txt >&2
        fail "'$*': stderr lacks '$pat'"
    fi
    return 0
}

expect_exit() {
    want=$1
    shift
    expect "$want" "" "$@"
}

expect_err() {
    grep -F -q -- "$1" err.txt || { cat err.txt >&2; fail "stderr lacks '$1'"; }
}

man_examples() {
    sed -n '/^\.SH EXAMPLES/,/^\.SH /p' "$SRC/man/$1" | sed -n '/^\.\(nf\|EX\)/,/^\.\(fi\|EE\)/p' |
        grep '^ *fp4-' | sed 's/\\-/-/g; s/^ *//'
}

n=0
run_man_examples() {
    for page in "$@"; do
        man_examples "$page" > cmds.txt
        [ -s cmds.txt ] || fail "$page: no examples found"
        while IFS= read -r cmd; do
            n=$((n + 1))
            sh -c "$cmd" > out.txt 2> err.txt || { cat err.txt >&2; fail "($page) $cmd"; }
            [ -s out.txt ] || fail "($page) no output: $cmd"
            echo "ok: $cmd"
        done < cmds.txt
    done
}
