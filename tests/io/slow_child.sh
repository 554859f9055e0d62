#!/bin/sh
# The HDF5 guard's child (lib/io/h5guard.c) is timed in CPU time (issue 8):
# 1. a child that waits longer than its budget without using the CPU (many MPI
#    ranks on few cores, a loaded machine, a slow file system) does not get a
#    good file refused as damaged. The shim (slow_child.c) makes the first
#    child sleep 9 s, past the 8 s a listing's isolated read of a small file
#    is given. Before the fix (a wall-clock alarm of the budget) the listing
#    failed with exit 3, "damaged HDF5 file: the HDF5 library did not finish
#    reading it within 8 s; refused". The same for fp4-mismatch's walk of the
#    data (5 s), which refused fp4-rl --demo's fresh captures at load 15.
# 2. a child that loops on the CPU is still stopped at its budget and the file
#    refused (exit 3, the CPU-time message), long before the wall-clock backstop.
set -eu
: "${FP4S_SHIM:?}"
W=$(mktemp -d /tmp/fp4s_slow_XXXXXX)
trap 'rm -rf "$W"' EXIT
cd "$W"
fail() { echo "FAIL: $*"; exit 1; }
fp4-capture synth -o c.h5 --steps 2 --tokens 64 > /dev/null
fp4-capture ls c.h5 > ref.txt
# the sanitizer build: the shim is preloaded before the ASan runtime
pre() {
    ASAN_OPTIONS="verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" LD_PRELOAD="$FP4S_SHIM" "$@"
}

rc=0
FP4S_TEST_SLOW_CHILD="$W/slept" FP4S_TEST_SLOW_SECONDS=9 pre fp4-capture ls c.h5 > got.txt 2> err.txt || rc=$?
[ -e slept ] || fail "no guard child slept (the shim was not used)"
[ "$rc" = 0 ] || fail "a good capture refused (exit $rc): $(cat err.txt)"
cmp -s ref.txt got.txt || fail "the listing differs"
echo "ok: a child that waited 9 s without the CPU read the file"
# the walk of a reader of data (5 s for a small file), as fp4-mismatch and
# fp4-rl --demo read a capture just written
fp4-mismatch c.h5 > ref.txt
rc=0
FP4S_TEST_SLOW_CHILD="$W/slept2" FP4S_TEST_SLOW_SECONDS=7 pre fp4-mismatch c.h5 > got.txt 2> err.txt || rc=$?
[ -e slept2 ] || fail "no guard child of fp4-mismatch slept"
[ "$rc" = 0 ] || fail "fp4-mismatch refused a good capture (exit $rc): $(cat err.txt)"
cmp -s ref.txt got.txt || fail "fp4-mismatch's output differs"
echo "ok: fp4-mismatch's walk waited 7 s without the CPU and read the capture"

# no core file from the child killed by SIGXCPU, wherever core dumps go
ulimit -c unlimited 2> /dev/null || :
start=$(date +%s)
rc=0
FP4S_TEST_SLOW_CHILD="$W/spun" FP4S_TEST_SLOW_SPIN=1 pre fp4-capture ls c.h5 > got.txt 2> err.txt || rc=$?
end=$(date +%s)
[ -e spun ] || fail "no guard child spun (the shim was not used)"
[ "$rc" = 3 ] || fail "a child looping on the CPU: exit $rc, not 3: $(cat err.txt)"
grep -q "c.h5: damaged HDF5 file: the HDF5 library did not finish reading it within 8 s of CPU time; refused" err.txt ||
    fail "the message: $(cat err.txt)"
[ ! -s got.txt ] || fail "a listing printed for a refused file"
ls core* > /dev/null 2>&1 && fail "the killed child left a core file"
echo "ok: a child looping on the CPU was stopped (exit 3) after $((end - start)) s of wall time"
