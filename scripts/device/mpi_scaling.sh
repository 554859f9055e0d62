#!/bin/bash
# The MPI strong-scaling table of fp4-decompose (bench/RESULTS.md, section
# MPI) on the GPU machine's 16 cores, which has no MPI and no network:
# Debian 12's Open MPI is carried as .deb files, unpacked and relocated, as
# scripts/device/setup.sh does for jansson, GSL and Check. One command, within
# FP4S_MPI_BUDGET (285) seconds of wall time in all:
#
#   bash scripts/device/mpi_scaling.sh                 (from the tree's top)
#   bash scripts/device/mpi_scaling.sh --fetch-debs    (here, with apt and a
#       network: download the .deb files below into .device/debs-mpi)
#
# Environment: FP4S_MPI_RANKS ("1 2 4 8 16"), FP4S_MPI_FILES (16 captures),
# FP4S_MPI_STEPS (4 steps each), FP4S_MPI_TOKENS (4096) and FP4S_MPI_HIDDEN
# (1024) set the size (16 x 4 x 4096 x 1024: 12.5 GiB); FP4S_MPI_BUDGET the
# wall-clock limit; FP4S_MPI_BUILD=DIR a build with MPI already (steps 1 and 2
# skipped, the system's mpirun or FP4S_MPIRUN); OUT the results' folder.
#
# 1. Unpacks .device/debs-mpi/*.deb (DEBS below) into .device/mpiroot, relocates
#    Open MPI there (OPAL_PREFIX, its pkg-config files rewritten for meson) and
#    checks that orterun and libmpi find every library they link.
# 2. scripts/device/setup.sh (jansson, GSL, Check from .device/debs) builds
#    fp4-capture, fp4-decompose and bench_mpi_read in build-mpi (-Dmpi=enabled,
#    -Dcuda=disabled: this measures the CPU).
# 3. Writes FILES captures of STEPS steps, one per rank as a data-parallel run
#    writes them (fp4-capture synth, in parallel, float32, no compression) in
#    $TMPDIR; the page cache holds them (128 GiB of memory), so the reads are
#    from memory, not from a disk.
# 4. For each P: the plain parallel read of the same rows (bench_mpi_read:
#    fp4s_source_read of every rank's rows in fp4-decompose's chunks, nothing
#    else) and mpirun -n P fp4-decompose -f nvfp4 --sides trainer,rollout,weight
#    --json over every capture, one thread per rank (FP4S_THREADS=1, no
#    binding); then one process with all CPUs as threads (no MPI). Every run's
#    JSON must equal P = 1's byte for byte. Then again, as long as the budget
#    leaves room, up to 3 runs each (the table gives the best and the spread).
# FP4S_MPI_CUDA=1: a run of its own instead of 3 and 4 (a CUDA build, about a
# minute more): fp4-decompose --device cuda under mpirun -n 1, 2, 4 against one
# process on the CPU, byte for byte, on a small capture.
# Writes $OUT/summary.txt (the table, the machine, the load, the checks) and
# $OUT/logs.tar.gz (build log, every run's standard error, the JSON of P = 1).
# Exit 0 when every JSON equalled P = 1's, 1 otherwise or when a step failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
DEBS="openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libhwloc15 libevent-core-2.1-7
libevent-pthreads-2.1-7 libfabric1 libibverbs1 librdmacm1 libpsm2-2 libpsm-infinipath1 libnl-3-200
libnl-route-3-200 libmunge2 libltdl7 libucx0 libnuma1"
if [ "${1:-}" = --fetch-debs ]; then
    mkdir -p .device/debs-mpi
    # shellcheck disable=SC2086
    (cd .device/debs-mpi && apt-get download $DEBS) || exit 1
    du -sh .device/debs-mpi
    exit 0
fi
RANKS=${FP4S_MPI_RANKS:-1 2 4 8 16}
FILES=${FP4S_MPI_FILES:-16}
STEPS=${FP4S_MPI_STEPS:-4}
TOKENS=${FP4S_MPI_TOKENS:-4096}
HIDDEN=${FP4S_MPI_HIDDEN:-1024}
BUDGET=${FP4S_MPI_BUDGET:-285}
OUT=${OUT:-$TOP/out}
mkdir -p "$OUT"
W=$(mktemp -d "${TMPDIR:-/tmp}/fp4s_mpi_scaling_XXXXXX")
L=$W/logs
mkdir -p "$L"
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
S=$OUT/summary.txt
: > "$S"
bad=0
say() { echo "mpi_scaling: $*" | tee -a "$S"; }
finish() { # the logs in one archive; the captures removed
    tar -czf "$OUT/logs.tar.gz" -C "$W" logs 2> /dev/null
    rm -rf "$W"
    say "total $(el) s"
    exit "$1"
}
say "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(free -g | awk '/^Mem:/ {print $2}') GiB, load $(cut -d' ' -f1-3 /proc/loadavg)"
# the staged tree's commit: .device/TREE, written when it was staged (git archive)
say "tree $(cat .device/TREE 2> /dev/null || echo '(not recorded in .device/TREE)'), budget $BUDGET s"

if [ -n "${FP4S_MPI_BUILD:-}" ]; then # a build with MPI already: steps 3 and 4 only
    B=$(cd "$FP4S_MPI_BUILD" && pwd)
    MPIRUN=${FP4S_MPIRUN:-mpirun}
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
else
    ls .device/debs-mpi/*.deb > /dev/null 2>&1 ||
        { say "no .device/debs-mpi/*.deb (see --fetch-debs; carry the tree's .device)"; finish 3; }
    M=$TOP/.device/mpiroot
    rm -rf "$M"
    mkdir -p "$M"
    for d in .device/debs-mpi/*.deb; do dpkg -x "$d" "$M" || { say "cannot unpack $d"; finish 3; }; done
    OMPI_LIB=$M/usr/lib/x86_64-linux-gnu/openmpi/lib
    for pc in "$M"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$OMPI_LIB"/pkgconfig/*.pc; do
        [ -f "$pc" ] && sed -i "s|/usr|$M/usr|g" "$pc"
    done
    export OPAL_PREFIX=$M/usr
    export PATH=$M/usr/bin:$PATH
    MPI_LD=$OMPI_LIB:$M/usr/lib/x86_64-linux-gnu:$M/usr/lib/x86_64-linux-gnu/pmix2/lib:$M/usr/lib/libpsm1
    export LD_LIBRARY_PATH=$MPI_LD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PKG_CONFIG_PATH=$M/usr/lib/x86_64-linux-gnu/pkgconfig:$OMPI_LIB/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    # relocated: the components under the prefix (OPAL_PREFIX moves the help texts too)
    export OMPI_MCA_mca_base_component_path=$OMPI_LIB/openmpi3
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    # shared memory only (one node); the components that need what the machine
    # lacks (InfiniBand, PSM, libfabric's providers) are not used and their
    # load errors not shown
    export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_mca_base_component_show_load_errors=0
    MPIRUN=$M/usr/bin/orterun
    missing=$(ldd "$MPIRUN" "$M"/usr/lib/x86_64-linux-gnu/libmpi.so.40 2>&1 | grep "not found" | sort -u)
    [ -z "$missing" ] || { say "Open MPI lacks libraries here: $missing"; finish 3; }
    ver=$("$M"/usr/bin/ompi_info --parsable 2> "$L/ompi_info.err" | grep -m1 '^ompi:version:full' | cut -d: -f4)
    [ -n "$ver" ] || { say "the unpacked ompi_info does not run: $(tail -3 "$L/ompi_info.err")"; finish 3; }
    say "Open MPI $ver unpacked in .device/mpiroot ($(el) s)"

    cu=disabled
    [ "${FP4S_MPI_CUDA:-0}" = 1 ] && cu=enabled
    export FP4S_DEVICE_BUILD=build-mpi FP4S_MESON_ARGS="-Dcuda=$cu -Dmpi=enabled ${FP4S_MESON_ARGS:-}"
    if ! bash scripts/device/setup.sh tools/fp4-capture tools/fp4-decompose bench/bench_mpi_read > "$L/setup.log" 2>&1; then
        tail -30 "$L/setup.log"
        say "setup (the build) failed: logs.tar.gz has logs/setup.log"
        finish 1
    fi
    . .device/env.sh
    export LD_LIBRARY_PATH=$MPI_LD:$LD_LIBRARY_PATH
    grep -q "mpi (tools under mpirun/srun)[^:]*: YES" "$L/setup.log" ||
        { say "the build has no MPI: $(grep -i mpi "$L/setup.log" | tail -3)"; finish 1; }
    B=$TOP/build-mpi
    ldd "$B"/tools/fp4-decompose | grep -q "$M/.*libmpi.so" ||
        { say "fp4-decompose does not load the unpacked libmpi: $(ldd "$B"/tools/fp4-decompose | grep mpi)"; finish 1; }
    say "built fp4-capture, fp4-decompose, bench_mpi_read ($(el) s)"
fi

# FP4S_MPI_CUDA=1 (a run of its own, instead of the table): --device cuda over
# ranks against one process on the CPU, byte for byte (fp4scope-mpi(7), GPUs)
if [ "${FP4S_MPI_CUDA:-0}" = 1 ]; then
    "$B"/tools/fp4-capture synth -o "$W/c.h5" --steps 3 --act-every 1 --tokens 2048 --hidden 512 > /dev/null ||
        { say "fp4-capture synth failed"; finish 1; }
    "$B"/tools/fp4-decompose --device cuda --sides weight "$W/c.h5" > /dev/null 2> "$L/cuda.err" ||
        { say "--device cuda does not run here: $(cat "$L/cuda.err")"; finish 1; }
    set -f # the arguments below are split, not globbed
    for args in "-f nvfp4 --by channel --json --sides trainer,rollout,weight" "--by row --csv --sides trainer,rollout" \
        "-f nvfp4 --by block --csv --steps 0 --sites layers.0.*"; do
        # shellcheck disable=SC2086
        FP4S_MPI=0 "$B"/tools/fp4-decompose $args "$W/c.h5" > "$W/cpu.out" 2>> "$L/cuda.err" ||
            { say "one process on the CPU failed: $(tail -2 "$L/cuda.err")"; bad=1; continue; }
        for p in 1 2 4; do
            # shellcheck disable=SC2086
            if ! timeout 120 "$MPIRUN" --bind-to none -n "$p" "$B"/tools/fp4-decompose --device cuda $args "$W/c.h5" \
                > "$W/gpu.out" 2>> "$L/cuda.err"; then
                say "FAIL: --device cuda $args, P=$p: $(tail -2 "$L/cuda.err")"
                bad=1
            elif cmp -s "$W/cpu.out" "$W/gpu.out"; then
                say "ok: --device cuda $args, P=$p: one CPU process's bytes"
            else
                say "FAIL: --device cuda $args, P=$p: differs from one CPU process"
                bad=1
            fi
        done
    done
    finish "$bad"
fi

D=$W/caps
mkdir -p "$D"
t=$(date +%s.%N)
seq 0 $((FILES - 1)) | FP4S_THREADS=1 xargs -P "$(nproc)" -I{} sh -c \
    '"$0"/tools/fp4-capture synth -o "$1/cap.rank$2.h5" --seed $(($2 + 1)) --steps "$3" --act-every 1 \
        --tokens "$4" --hidden "$5" --f32 --gzip 0 > /dev/null' "$B" "$D" {} "$STEPS" "$TOKENS" "$HIDDEN" \
    2> "$L/synth.err" || { say "fp4-capture synth failed: $(head -3 "$L/synth.err")"; finish 1; }
caps=$(ls "$D"/cap.rank*.h5)
bytes=$(du -cb $caps | tail -1 | cut -f1)
cat $caps > /dev/null
say "$FILES captures of $STEPS steps ($TOKENS tokens, hidden $HIDDEN, float32), $(python3 -c "print('%.2f' % ($bytes / 2**30))") GiB on disk, written in $(python3 -c "print('%.1f' % ($(date +%s.%N) - $t))") s, in the page cache ($(el) s)"

DEC="-f nvfp4 --sides trainer,rollout,weight --json"
# one timed command: its wall seconds on stdout, its stdout into $1, stderr appended to $2;
# killed past the budget (less 15 s for the summary)
timed() {
    local out=$1 err=$2 left
    shift 2
    left=$((T0 + BUDGET - 15 - $(date +%s)))
    [ "$left" -gt 2 ] || return 124
    local s e rc
    s=$(date +%s.%N)
    timeout -k 3 "$left" "$@" > "$out" 2>> "$err"
    rc=$?
    e=$(date +%s.%N)
    python3 -c "print('%.3f' % ($e - $s))"
    return $rc
}
declare -A RD DC NR ND
ref=
bad=0
one_pass() { # $1: the pass
    local p r d rc
    for p in $RANKS; do
        # the plain read: bench_mpi_read's own time (barrier to the slowest rank's last read)
        if r=$(timed "$W/read.out" "$L/read.p$p.err" env FP4S_THREADS=1 "$MPIRUN" --bind-to none -n "$p" \
            "$B"/bench/bench_mpi_read $caps); then
            RD[$p]="${RD[$p]:-} $(cut -d' ' -f3 "$W/read.out")"
            GIB=$(cut -d' ' -f4 "$W/read.out")
        else
            say "P=$p pass $1: the plain read failed or ran out of time (status $?)"
            return 1
        fi
        # fp4-decompose: the wall time of the whole mpirun (start, opens, reads, merge, output)
        if d=$(timed "$W/p$p.json" "$L/decompose.p$p.err" env FP4S_THREADS=1 "$MPIRUN" --bind-to none -n "$p" \
            "$B"/tools/fp4-decompose $DEC $caps); then
            DC[$p]="${DC[$p]:-} $d"
        else
            rc=$?
            say "P=$p pass $1: fp4-decompose failed or ran out of time (status $rc): $(tail -2 "$L/decompose.p$p.err")"
            return 1
        fi
        if [ -z "$ref" ]; then
            ref=$W/ref.json
            cp "$W/p$p.json" "$ref"
            cp "$ref" "$L/p$p.json"
        elif ! cmp -s "$ref" "$W/p$p.json"; then
            say "FAIL: P=$p pass $1: the JSON differs from P=$(echo $RANKS | cut -d' ' -f1)'s"
            cp "$W/p$p.json" "$L/p$p.pass$1.json"
            bad=1
        fi
        ND[$p]=$((${ND[$p]:-0} + 1))
    done
    if d=$(timed "$W/threads.json" "$L/decompose.threads.err" env FP4S_MPI=0 FP4S_THREADS="$(nproc)" \
        "$B"/tools/fp4-decompose $DEC $caps); then
        DC[t]="${DC[t]:-} $d"
        cmp -s "$ref" "$W/threads.json" || { say "FAIL: one process with $(nproc) threads: the JSON differs"; bad=1; }
    else
        say "pass $1: fp4-decompose with $(nproc) threads failed or ran out of time"
        return 1
    fi
    say "pass $1 done ($(el) s)"
}
say "runs: $RANKS ranks, one thread each; fp4-decompose $DEC"
GIB=0
# up to 3 passes: another one while the last one's time fits what is left
for k in 1 2 3; do
    ps=$(el)
    one_pass "$k" || { bad=1; break; }
    [ "$bad" = 0 ] || break
    [ $(($(el) + $(el) - ps)) -lt $((BUDGET - 20)) ] || break
done

# the table: best of the runs, and the spread (into summary.txt and on standard output)
TB=$W/table
{
    echo
    echo "| ranks | runs | plain read s (best; all) | read GiB/s | fp4-decompose s (best; all) | GiB/s | speedup | x read |"
    echo "|---|---|---|---|---|---|---|---|"
} > "$TB"
python3 - "$GIB" "$(nproc)" "$RANKS" >> "$TB" <<PY
import sys
gib, ncpu, ranks = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split()
rd = {$(for p in $RANKS; do printf "'%s': [%s], " "$p" "$(echo ${RD[$p]:-} | tr ' ' ',')"; done)}
dc = {$(for p in $RANKS t; do printf "'%s': [%s], " "$p" "$(echo ${DC[$p]:-} | tr ' ' ',')"; done)}
t1 = min(dc[ranks[0]]) if dc.get(ranks[0]) else None
fmt = lambda v: ", ".join("%.2f" % x for x in v)
for p in ranks:
    r, d = rd.get(p) or [], dc.get(p) or []
    if not d:
        print("| %s | 0 | | | (not run) | | | |" % p); continue
    rb, db = (min(r) if r else float("nan")), min(d)
    print("| %s | %d | %.2f; %s | %.2f | %.2f; %s | %.2f | %.2fx | %.2fx |" % (
        p, len(d), rb, fmt(r), gib / rb, db, fmt(d), gib / db, t1 / db if t1 else float("nan"), db / rb))
d = dc.get("t") or []
if d:
    print("| 1 process, %d threads, no MPI | %d | | | %.2f; %s | %.2f | %.2fx | |" % (
        ncpu, len(d), min(d), fmt(d), gib / min(d), t1 / min(d) if t1 else float("nan")))
PY
{
    echo
    echo "GiB: the float32 bytes of the trainer, rollout and weight datasets read ($GIB GiB). plain read: bench_mpi_read's"
    echo "time from a barrier to the slowest rank's last read (no mpirun start). fp4-decompose: the wall time of the whole"
    echo "mpirun (start, HDF5 opens and checks, reads, NVFP4's two passes, the merge on rank 0, the JSON). speedup:"
    echo "the best time of P=$(echo $RANKS | cut -d' ' -f1) over this one's. x read: fp4-decompose over the plain read."
    echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
} >> "$TB"
tee -a "$S" < "$TB"
if [ "$bad" = 0 ]; then
    say "every run's JSON equalled P=$(echo $RANKS | cut -d' ' -f1)'s byte for byte (and the $(nproc)-thread process's)"
else
    say "FAIL: see above"
fi
finish "$bad"
