#!/bin/sh
# The corruption fuzz (tests/fuzz/corrupt.py) over datasets/synth-tiny.h5:
# N (the first argument, default 1000) one-byte corruptions of its live
# metadata, every tool on each copy, 10 s each. Fails on any signal, hang,
# unexpected exit status, libhdf5 output or changed input; prints the figures.
# With 'raw' as the second argument: N one-byte corruptions of the raw data of
# the capture rewritten uncompressed (the writer's default) with a Fletcher-32
# checksum on every dataset (what the writer's checksum option stores):
# besides the above, fails when a tool exits 0 with other output than on the
# undamaged file (other numbers, silently). 'raw-plain': the same without the
# checksums, which only counts those runs (deflate's own check catches most
# damage of a compressed capture, hence the uncompressed copies).
. "$FP4S_SRCDIR/tests/capture/common.sh"
export LSAN_OPTIONS="suppressions=$SRC/tests/capture/lsan-hdf5.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
cap="$SRC/datasets/synth-tiny.h5"
set --  "${1:-1000}" "${2:-metadata}"
raw=""
if [ "$2" = raw ] || [ "$2" = raw-plain ]; then
    "$PY" - "$cap" "$T/copy.h5" "$2" <<'PYEOF'
import sys, h5py
with h5py.File(sys.argv[1], "r") as src, h5py.File(sys.argv[2], "w") as dst:
    for k, v in src.attrs.items():
        dst.attrs[k] = v
    def copy(name, obj):
        if isinstance(obj, h5py.Group):
            g = dst.require_group(name)
            for k, v in obj.attrs.items():
                g.attrs[k] = v
            return
        kw = {}
        if obj.ndim and obj.size:
            kw = dict(chunks=obj.chunks or True, maxshape=obj.maxshape if obj.chunks else None,
                      fletcher32=sys.argv[3] == "raw")
        d = dst.create_dataset(name, data=obj[()], **kw)
        for k, v in obj.attrs.items():
            d.attrs[k] = v
    src.visititems(copy)
PYEOF
    cap="$T/copy.h5"
    raw=--raw
fi
"$PY" "$SRC/tests/fuzz/corrupt.py" "$cap" "$1" $raw \
    --seed "${FP4S_CORRUPT_SEED:-$(date +%s)}" --timeout 10 > "$T/summary.json" || {
    cat "$T/summary.json"; fail "corruption fuzz"; }
"$PY" - "$T/summary.json" "$2" <<'PYEOF' || fail "a checksummed capture's damaged data was read as other numbers"
import json, sys
j = json.load(open(sys.argv[1]))
print("corruptions %d (seed %d) of %d candidate bytes, per category %s" % (
    j["corruptions"], j["seed"], j["metadata_bytes"], j["tried_per_category"]))
print("tool runs %d: signals %d, hangs %d, other exits %d, inputs changed %d" % (
    j["tool_runs"], j["signals"], j["hangs"], j["other_exits"], j["inputs_changed"]))
print("exit codes: %s" % j["exit_codes"])
if "wrong_output_exit_0" in j:
    print("other output with exit 0: %d (tools compared: %s)" % (j["wrong_output_exit_0"], j["compared_tools"]))
    if j["wrong_output_exit_0"] and sys.argv[2] == "raw":
        sys.exit(1)
PYEOF
echo ok
