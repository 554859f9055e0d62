# Sourced by the mismatch shell tests: a python3 with numpy (tests/python.sh),
# the shared prelude (tests/lib.sh: SRC, T, fail, expect_exit, expect_err)
# and a JSON field check.
. "${FP4S_SRCDIR:?}/tests/python.sh"
. "$FP4S_SRCDIR/tests/lib.sh"
REF="$PY $SRC/tests/mismatch/ref_mismatch.py"

# jq-like field check with python: jget FILE EXPR (EXPR uses j)
jget() { $PY -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }
