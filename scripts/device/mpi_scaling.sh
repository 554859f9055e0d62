#!/bin/bash
# The MPI strong-scaling table of fp4-decompose (bench/RESULTS.md, section
# MPI) on the GPU machine's 16 cores, which has no MPI and no network: Debian
# 12's Open MPI is carried as .deb files and unpacked, as scripts/device/setup.sh
# does for jansson, GSL and Check.
#
#   scripts/device/mpi_scaling.sh [RANKS...]          (default 1 2 4 8 16)
#   FP4S_MPI_BUILD=build scripts/device/mpi_scaling.sh 1 2   (a build with MPI
#       here: steps 3 and 4 only; FP4S_MPI_FILES, FP4S_MPI_STEPS set the size)
#
# 1. Unpacks .device/debs-mpi/*.deb (openmpi-bin, openmpi-common, libopenmpi3,
#    libopenmpi-dev, libpmix2, libhwloc15, libevent, libfabric1, libibverbs1,
#    librdmacm1, libpsm2-2, libpsm-infinipath1, libnl, libmunge2, libltdl7,
#    libucx0) into .device/mpiroot; Open MPI is relocated there with
#    OPAL_PREFIX, its pkg-config files are rewritten for meson. To stage them
#    (here, where scripts/deps.sh --ci installed them, they are in apt's cache;
#    else apt-get download the same names), from the staged tree's top:
#      mkdir -p .device/debs-mpi && (cd /var/cache/apt/archives && cp openmpi-bin_* \
#        openmpi-common_* libopenmpi3_* libopenmpi-dev_* libpmix2_* libhwloc15_* \
#        libevent-core-2.1-7_* libevent-pthreads-2.1-7_* libfabric1_* libibverbs1_* \
#        librdmacm1_* libpsm2-2_* libpsm-infinipath1_* libnl-3-200_* libnl-route-3-200_* \
#        libmunge2_* libltdl7_* libucx0_* "$OLDPWD/.device/debs-mpi/")        (7.1 MiB)
#    and .device/debs as for setup.sh; carry [".device"].
# 2. scripts/device/setup.sh builds fp4-capture, fp4-decompose and
#    bench_mpi_read (FP4S_DEVICE_BUILD=build-mpi; the summary must say mpi YES).
# 3. Writes FILES (16) captures of STEPS (4) steps each, one per rank as a
#    data-parallel run writes them (fp4-capture synth in parallel, float32, no
#    compression: 16 x 4 steps is 12.5 GiB), in $TMPDIR; the page cache holds
#    them (128 GiB of memory), so the reads are from memory, not from a disk.
# 4. For each P: the plain parallel read of the same rows (bench_mpi_read:
#    fp4s_source_read of every rank's rows in fp4-decompose's chunks, nothing
#    else) and mpirun -n P fp4-decompose -f nvfp4 --json over every trainer,
#    rollout and weight dataset (what bench_mpi_read reads), one thread per rank (FP4S_THREADS=1); then one
#    process with 16 threads (no MPI) for comparison; P = 16's JSON must equal
#    P = 1's byte for byte. Prints a markdown table last; logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
TOP=$(pwd)
RANKS=${*:-1 2 4 8 16}
FILES=${FP4S_MPI_FILES:-16}
STEPS=${FP4S_MPI_STEPS:-4}
OUT=${OUT:-$TOP/out}
mkdir -p "$OUT"
M=$TOP/.device/mpiroot
T0=$(date +%s)
if [ -n "${FP4S_MPI_BUILD:-}" ]; then # a build with MPI already (this machine): steps 3 and 4 only
    B=$(cd "$FP4S_MPI_BUILD" && pwd)
    MPIRUN=${FP4S_MPIRUN:-mpirun}
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    export OMPI_MCA_hwloc_base_binding_policy=none
elif ! ls .device/debs-mpi/*.deb > /dev/null 2>&1; then
    echo "mpi_scaling: no .device/debs-mpi/*.deb (carry .device; see the list above)" >&2
    exit 3
else
rm -rf "$M"
mkdir -p "$M"
for d in .device/debs-mpi/*.deb; do dpkg -x "$d" "$M"; done
OMPI_LIB=$M/usr/lib/x86_64-linux-gnu/openmpi/lib
for pc in "$M"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$OMPI_LIB"/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i "s|/usr|$M/usr|g" "$pc"
done
export OPAL_PREFIX=$M/usr
export PATH=$M/usr/bin:$PATH
export LD_LIBRARY_PATH=$OMPI_LIB:$M/usr/lib/x86_64-linux-gnu:$M/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_PATH=$M/usr/lib/x86_64-linux-gnu/pkgconfig:$OMPI_LIB/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
# relocated: the components under the prefix (OPAL_PREFIX moves the help texts too)
export OMPI_MCA_mca_base_component_path=$OMPI_LIB/openmpi3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
# shared memory only (one node); the components that need what the machine lacks
# (InfiniBand, PSM, libfabric's providers) are not used and their load errors not shown
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_mca_base_component_show_load_errors=0
MPIRUN="$M/usr/bin/orterun"
echo "mpi_scaling: Open MPI $("$M"/usr/bin/ompi_info --parsable 2>/dev/null | grep -m1 '^ompi:version:full' | cut -d: -f4) unpacked ($(($(date +%s) - T0)) s)"

export FP4S_DEVICE_BUILD=build-mpi
bash scripts/device/setup.sh tools/fp4-capture tools/fp4-decompose bench/bench_mpi_read > "$OUT/setup.log" 2>&1 ||
    { tail -30 "$OUT/setup.log"; echo "mpi_scaling: setup failed"; exit 1; }
. .device/env.sh
export LD_LIBRARY_PATH=$OMPI_LIB:$M/usr/lib/x86_64-linux-gnu:$M/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
grep -q "mpi (tools under mpirun/srun)[^:]*: YES" "$OUT/setup.log" ||
    { grep -i "mpi" "$OUT/setup.log" | tail -5; echo "mpi_scaling: the build has no MPI"; exit 1; }
B=$TOP/build-mpi
echo "mpi_scaling: built ($(($(date +%s) - T0)) s)"
fi

D=${TMPDIR:-/tmp}/fp4s_mpi_scaling
rm -rf "$D"
mkdir -p "$D"
for i in $(seq 0 $((FILES - 1))); do
    FP4S_THREADS=1 "$B"/tools/fp4-capture synth -o "$D/cap.rank$i.h5" --seed $((i + 1)) --steps "$STEPS" \
        --act-every 1 --tokens 4096 --hidden 1024 --f32 --gzip 0 > /dev/null &
done
wait
caps=$(ls "$D"/cap.rank*.h5)
bytes=$(du -cb $caps | tail -1 | cut -f1)
cat $caps > /dev/null
echo "mpi_scaling: $FILES captures, $(python3 -c "print('%.2f' % ($bytes / 2**30))") GiB in $D ($(($(date +%s) - T0)) s)"
echo "mpi_scaling: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), load $(cut -d' ' -f1-3 /proc/loadavg)"

secs() { /usr/bin/env TIMEFORMAT=%R bash -c "time $* > /dev/null 2>> '$OUT/runs.log'" 2>&1 | tail -1; }
echo "| ranks | plain read s | GiB/s | fp4-decompose s | GiB/s | speedup | x read |" > "$OUT/table.md"
echo "|---|---|---|---|---|---|---|" >> "$OUT/table.md"
t1=
for p in $RANKS; do
    r=$(FP4S_THREADS=1 "$MPIRUN" -n "$p" "$B"/bench/bench_mpi_read $caps 2>> "$OUT/runs.log")
    rs=$(echo "$r" | cut -d' ' -f3) gib=$(echo "$r" | cut -d' ' -f4) rate=$(echo "$r" | cut -d' ' -f5)
    FP4S_THREADS=1 "$MPIRUN" -n "$p" "$B"/tools/fp4-decompose -f nvfp4 --sides trainer,rollout,weight --json $caps \
        > "$OUT/p$p.json" 2>> "$OUT/runs.log"   # warm
    d=$(secs "FP4S_THREADS=1 '$MPIRUN' -n $p '$B'/tools/fp4-decompose -f nvfp4 --sides trainer,rollout,weight --json $caps")
    [ -z "$t1" ] && t1=$d
    python3 -c "p,rs,rate,g,d,t1=$p,$rs,$rate,$gib,$d,$t1; print('| %d | %.3f | %.2f | %.3f | %.2f | %.2fx | %.2fx |' % (p, rs, rate, d, g / d, t1 / d, d / rs))" >> "$OUT/table.md"
    echo "mpi_scaling: P=$p done ($(($(date +%s) - T0)) s)"
done
d16=$(secs "FP4S_MPI=0 FP4S_THREADS=$(nproc) '$B'/tools/fp4-decompose -f nvfp4 --sides trainer,rollout,weight --json $caps")
echo "| 1 process, $(nproc) threads (no MPI) | | | $d16 | | $(python3 -c "print('%.2fx' % ($t1 / $d16))") | |" >> "$OUT/table.md"
first=$(echo $RANKS | cut -d' ' -f1) last=$(echo $RANKS | awk '{print $NF}')
if cmp -s "$OUT/p$first.json" "$OUT/p$last.json"; then
    echo "mpi_scaling: P=$last's JSON equals P=$first's byte for byte"
else
    echo "mpi_scaling: FAIL: P=$last's JSON differs from P=$first's"
fi
rm -rf "$D"
echo "mpi_scaling: total $(($(date +%s) - T0)) s"
cat "$OUT/table.md"
