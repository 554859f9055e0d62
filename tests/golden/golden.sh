#!/bin/sh
# Golden outputs of every tool: what each case of cases.sh prints (standard
# output and error, exit status) and writes (JSON, CSV, HDF5, report
# directories), normalised only where a run legitimately differs, against
# tests/golden/expected/NAME.txt. The refactors of the tools must keep these
# bytes; a change of output made on purpose regenerates them and the diff is
# reviewed with the change.
#
#   golden.sh check    the test: one process, then the cases of KIND mpi under
#                      mpirun, each at 2, 3 or 4 ranks in turn (FP4S_MPI_FULL=1:
#                      every case at 1, 2, 3 and 4), against the same files
#   golden.sh update   regenerate tests/golden/expected from this build (one
#                      process); `ninja -C BUILD golden-update` runs it
#
# Environment: FP4S_SRCDIR, FP4S_BUILDDIR (the tools in $FP4S_BUILDDIR/tools),
# FP4S_MPIRUN (none: the MPI passes are skipped), FP4S_HAVE_GNUPLOT and
# FP4S_HAVE_GSL (the goldens are made with both: without them the test skips).
#
# What is normalised: the build directory's path and the work directory's
# (WORK), the version (VERSION), dates and times of day (DATE), and the
# values of JSON keys that time the run ("seconds", "steps_per_second" and
# fp4-rl's "t_*" timers).
# HDF5 files are compared as h5dump text with every float exact (%a), a DATA
# block of more than 64 lines as its SHA-256; images not at all (their name is
# listed). An output of more than GOLDEN_LIMIT bytes
# after normalisation is stored as its size, line count, SHA-256 and first 40
# lines. The remedies' and fp4-rl's GEMMs take the fixed-order path (the same
# bits on any x86-64 CPU and thread count: lib/core/gemm.h); the BLAS's kernel
# is pinned as well (OPENBLAS_CORETYPE=Prescott: OpenBLAS's GEMMs round
# differently per CPU kernel) for a run with FP4S_GEMM=blas, and threads are
# 1, so that the goldens hold on any x86-64 machine.
set -eu
SRC=${FP4S_SRCDIR:?FP4S_SRCDIR not set}
B=${FP4S_BUILDDIR:?FP4S_BUILDDIR not set}
mode=${1:-check}
EXP=$SRC/tests/golden/expected
GOLDEN_LIMIT=${GOLDEN_LIMIT:-98304}
export PATH="$B/tools:$PATH:/usr/local/bin:/usr/bin:/bin" LC_ALL=C TZ=UTC
export FP4S_THREADS=1 OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=Prescott
unset FP4S_PROGRESS FP4S_MPI FP4S_MPI_VERBOSE FP4S_FORCE_REF FP4S_GNUPLOT 2> /dev/null || true
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mca_base_component_disable_dlclose=1
if [ -f "$SRC/tests/mpi/lsan.supp" ]; then
    # print_suppressions=0: LeakSanitizer's "Suppressions used" table on
    # stderr is not the tool's output (and looks like mpirun's banner)
    export LSAN_OPTIONS="suppressions=$SRC/tests/mpi/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
fi
case "$mode" in check | update) ;; *) echo "usage: golden.sh check|update" >&2; exit 2 ;; esac
for t in fp4-quant fp4-decompose fp4-channels fp4-capture fp4-mismatch fp4-plot fp4-report fp4-compare \
         fp4-remedy fp4-rl; do
    command -v "$t" > /dev/null 2>&1 || { echo "skip: $t is not built (the goldens need every tool)"; exit 77; }
done
if [ "${FP4S_HAVE_GNUPLOT:-1}" != 1 ] || [ "${FP4S_HAVE_GSL:-1}" != 1 ]; then
    echo "skip: the goldens are made with gnuplot and GSL built in"
    exit 77
fi
command -v h5dump > /dev/null 2>&1 || { echo "skip: h5dump (hdf5-tools) is not installed"; exit 77; }
VERSION=$(sh "$SRC/scripts/version.sh")

W=$(mktemp -d "${TMPDIR:-/tmp}/fp4s_golden.XXXXXX")
trap 'rm -rf "$W"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir "$W/work"
cd "$W/work"
ln -s "$SRC/datasets" data
ln -s "$SRC/tests/fuzz/corpus" corpus
# inputs written here, not by a tool: a CSV trace and a per-step scalar log
printf 'step,seq,trainer_logprob,rollout_logprob\n' > t.csv
awk 'BEGIN { for (s = 0; s < 12; s++) for (i = 0; i < 40; i++)
    printf "%d,%d,%.6f,%.6f\n", s, i % 5, -0.5 - i / 80, -0.5 - i / 80 - s * 0.001 }' >> t.csv
printf 'step,reward,rollout_corr/k3_kl\n' > sc.csv
awk 'BEGIN { for (s = 0; s < 30; s++) printf "%d,%.4f,%.6g\n", s, s / 30, 1e-4 * exp(s / 9) }' >> sc.csv

vesc=$(printf '%s' "$VERSION" | sed 's/[.]/[.]/g')
norm() {
    sed -e "s#$W/work/##g; s#$W/work#WORK#g; s#$W#WORK#g; s#$B/#BUILD/#g" \
        -e "s/\([^0-9.]\)$vesc\([^0-9.]\|\$\)/\1VERSION\2/g" \
        -e 's/[0-9]\{4\}-[0-9][0-9]-[0-9][0-9][T ][0-9][0-9]:[0-9][0-9]\(:[0-9][0-9]\)\{0,1\}\([.][0-9]*\)\{0,1\}\( UTC\|Z\|[+-][0-9][0-9]:\{0,1\}[0-9][0-9]\)\{0,1\}/DATE/g' \
        -e 's/\("seconds\|"steps_per_second\|"t_[a-z_]*\)": [-0-9.eE+]*/\1": T/g'
}

# record FILE TEXTFILE: the normalised text, or its digest over the limit
record() {
    size=$(wc -c < "$2")
    if [ "$size" -le "$GOLDEN_LIMIT" ]; then
        cat "$2"
        return
    fi
    printf 'digest: %s bytes, %s lines, sha256 %s; the first 40 lines:\n' "$size" "$(wc -l < "$2")" \
        "$(sha256sum < "$2" | cut -d' ' -f1)"
    head -n 40 "$2"
}

# h5blocks: h5dump text with every DATA block of more than 64 lines replaced
# by its line count and SHA-256 (names, types, shapes and attributes stay)
h5blocks() {
    awk -v tmp="$W/h5blk" '
        function flush(   cmd, sum) {
            if (n <= 64) { for (i = 1; i <= n; i++) print buf[i] }
            else {
                cmd = "sha256sum > " tmp
                for (i = 1; i <= n; i++) print buf[i] | cmd
                close(cmd)
                getline sum < tmp
                close(tmp)
                print ind "(" n " lines, sha256 " substr(sum, 1, 64) ")"
            }
            n = 0
        }
        inblk && /^ *[}]$/ { flush(); inblk = 0; print; next }
        inblk { buf[++n] = $0; next }
        /^ *DATA [{]$/ { inblk = 1; n = 0; ind = $0; sub(/DATA [{]$/, "   ", ind); print; next }
        { print }
        END { if (inblk) flush() }'
}

# emit PATH: one output file of a case
emit() {
    f=$1
    case "$f" in
        *.png | *.svg | *.pdf)
            echo "--- file $f: an image, not compared"
            return ;;
        *.h5)
            echo "--- file $f (h5dump -m %a)"
            h5dump -m %a "$f" 2>&1 | tail -n +2 | norm | h5blocks > "$W/f.txt" ;;
        *)
            if tr -d '\000' < "$f" | cmp -s - "$f"; then
                echo "--- file $f"
                norm < "$f" > "$W/f.txt"
            else
                echo "--- file $f: binary, $(wc -c < "$f") bytes, sha256 $(sha256sum < "$f" | cut -d' ' -f1)"
                return
            fi ;;
    esac
    record "$f" "$W/f.txt"
}

# corpus TOOL KIND SUFFIX: every file of corpus/KIND through TOOL, as FILE.KIND
corpus() {
    for f in corpus/"$2"/*; do
        cp "$f" "in.$2"
        set +e
        "$1" "in.$2$3" > "$W/c.out" 2> "$W/c.err"
        rc=$?
        set -e
        echo "== $(basename "$f"): exit $rc"
        norm < "$W/c.out"
        [ -s "$W/c.err" ] && { echo "-- stderr"; norm < "$W/c.err"; }
        rm -f "in.$2"
    done
}

# the pass: P = 0 runs every case as one process; P >= 1 runs the cases of
# KIND mpi under mpirun -n P (the inputs are there from the pass P = 0)
P=0
OUT=
rot=0
c() {
    name=$1 kind=$2 outs=$3
    shift 3
    [ "$P" = 0 ] || [ "$kind" = mpi ] || return 0
    if [ "$PASS" = rotate ]; then P=$((rot % 3 + 2)) rot=$((rot + 1)); fi
    t0=$(date +%s)
    # shellcheck disable=SC2086
    [ "$outs" = - ] || rm -rf $outs
    set +e
    if [ "$P" -eq 0 ]; then
        "$@" > "$W/out" 2> "$W/err"
    else
        # the sanitizer build: unwind malloc stacks in full under mpirun, so
        # that Open MPI's allocations carry the library names lsan.supp matches
        # (the fast unwinder stops at libraries without frame pointers)
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0" \
            "$FP4S_MPIRUN" --oversubscribe -n "$P" "$@" > "$W/out" 2> "$W/err"
    fi
    rc=$?
    set -e
    {
        printf '$'
        printf ' %s' "$@" | norm
        printf '\nexit %s\n--- stdout\n' "$rc"
        norm < "$W/out" > "$W/f.txt"
        record stdout "$W/f.txt"
        echo "--- stderr"
        # mpirun's own banner when a rank exits non-zero: not the tool's output
        awk -v p="$P" 'p > 0 && /^--------------------+$/ { skip = !skip; next } !skip' "$W/err" | norm
        if [ "$outs" != - ]; then
            # shellcheck disable=SC2086
            for o in $outs; do
                if [ -d "$o" ]; then
                    find "$o" -type f | sort > "$W/list"
                    while IFS= read -r f; do emit "$f"; done < "$W/list"
                elif [ -e "$o" ]; then
                    emit "$o"
                else
                    echo "--- file $o: not written"
                fi
            done
        fi
    } > "$OUT/$name.txt"
    [ "$kind" != in ] || [ "$rc" -eq 0 ] || { cat "$W/err" >&2; echo "golden: input case $name failed" >&2; exit 1; }
    if [ "$P" -eq 0 ]; then lab=; else lab=" (mpirun -n $P)"; fi
    echo "ran: $name$lab: exit $rc, $(($(date +%s) - t0)) s"
}

pass() { # pass P OUTDIR (P rotate: each case at 2, 3 or 4 ranks in turn)
    PASS=$1 P=$1 OUT=$2
    mkdir -p "$OUT"
    # shellcheck source=cases.sh
    . "$SRC/tests/golden/cases.sh"
}

if [ "$mode" = update ]; then
    pass 0 "$W/new"
    mkdir -p "$EXP"
    rm -f "$EXP"/*.txt
    cp "$W/new"/*.txt "$EXP"/
    echo "golden: $(ls "$EXP" | wc -l) expected files written to $EXP; review them with git diff"
    exit 0
fi

fails=0
compare() { # compare OUTDIR LABEL: every file of OUTDIR against expected
    for f in "$1"/*.txt; do
        n=$(basename "$f")
        if [ ! -f "$EXP/$n" ]; then
            echo "FAIL ($2): ${n%.txt}: no expected file (a new case: run golden-update)"
            fails=$((fails + 1))
        elif ! cmp -s "$EXP/$n" "$f"; then
            echo "FAIL ($2): ${n%.txt} differs from tests/golden/expected/$n:"
            diff -u "$EXP/$n" "$f" | head -n 60
            fails=$((fails + 1))
        fi
    done
}
pass 0 "$W/got"
compare "$W/got" "one process"
for f in "$EXP"/*.txt; do
    [ -f "$W/got/$(basename "$f")" ] || { echo "FAIL: $(basename "$f" .txt): expected, but no such case"; fails=$((fails + 1)); }
done
if [ -z "${FP4S_MPIRUN:-}" ]; then
    echo "note: no MPI build or mpirun: the MPI passes are skipped"
else
    if [ "${FP4S_MPI_FULL:-0}" = 1 ]; then
        for p in 1 2 3 4; do
            pass "$p" "$W/got$p"
            compare "$W/got$p" "mpirun -n $p"
        done
    else
        pass rotate "$W/gotr"
        compare "$W/gotr" "mpirun -n 2, 3 or 4"
    fi
fi
if [ "$fails" -gt 0 ]; then
    echo "$fails case(s) differ. If the change of output is intended, regenerate the goldens"
    echo "(ninja -C BUILD golden-update, or FP4S_SRCDIR=. FP4S_BUILDDIR=BUILD sh tests/golden/golden.sh update)"
    echo "and commit them with the change; the diff of tests/golden/expected is what a reviewer reads."
    exit 1
fi
echo "all goldens identical"
