#!/bin/sh
# Run every command of the EXAMPLES section of fp4scope-mpi(7) and of the MPI
# sections of fp4-decompose(1) and the other tools' pages (mpirun with
# this machine's options, common.sh) on a synthetic capture; each must exit 0,
# print something, and print what one process prints (mpirun reads standard
# input: the commands get /dev/null).
. "$(dirname "$0")/common.sh"
fp4-capture synth -o cap.h5 --steps 4 --tokens 64 > /dev/null
# the EXAMPLES of fp4scope-mpi(7), the MPI sections of the tools' pages
{ sed -n '/^\.SH EXAMPLES/,/^\.SH /p' "$FP4S_SRCDIR/man/fp4scope-mpi.7"
  for t in decompose channels mismatch compare remedy; do
      sed -n '/^\.SH MPI/,/^\.SH /p' "$FP4S_SRCDIR/man/fp4-$t.1"
  done; } | sed -n '/^\.nf/,/^\.fi/p' | grep 'mpirun ' | sed 's/\\-/-/g; s/^ *//' > cmds.txt
[ "$(wc -l < cmds.txt)" -ge 5 ] || { echo "man/: the MPI examples are not found: $(cat cmds.txt)"; exit 1; }
n=0
while IFS= read -r cmd; do
    n=$((n + 1))
    rm -f rep.h5
    one=$(printf '%s\n' "$cmd" | sed 's/mpirun -n [0-9]* //')
    sh -c "$one" < /dev/null > ref.txt 2> /dev/null || { fail "one process: $one"; continue; }
    rm -f rep.h5
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0" \
        sh -c "$(printf '%s\n' "$cmd" | sed "s|mpirun |\"\$FP4S_MPIRUN\" --oversubscribe |")" < /dev/null > out.txt 2> err.txt ||
        { fail "$cmd: $(cat err.txt)"; continue; }
    [ -s out.txt ] || fail "no output: $cmd"
    case "$cmd" in
        FP4S_MPI_VERBOSE=*) [ "$(grep -c 'rank [01] of 2: .* rows' err.txt)" = 2 ] || fail "$cmd: $(cat err.txt)" ;;
        *) cmp -s ref.txt out.txt || fail "$cmd: not what one process prints" ;;
    esac
    echo "ok: $cmd"
done < cmds.txt
[ "$fails" = 0 ] || exit 1
echo "$n man-page examples ran"
