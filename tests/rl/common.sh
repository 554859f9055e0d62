# Sourced by the fp4-rl shell tests: the shared prelude (tests/lib.sh: SRC, T,
# fail, expect_exit, expect_err).
. "${FP4S_SRCDIR:?FP4S_SRCDIR not set}/tests/lib.sh"
