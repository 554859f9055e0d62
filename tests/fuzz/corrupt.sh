#!/bin/sh
# The corruption fuzz (tests/fuzz/corrupt.py) over datasets/synth-tiny.h5:
# N (the argument, default 1000) one-byte corruptions of its live metadata,
# every tool on each copy, 10 s each. Fails on any signal, hang, unexpected
# exit status, libhdf5 output or changed input; prints the figures.
. "$FP4S_SRCDIR/tests/capture/common.sh"
export LSAN_OPTIONS="suppressions=$SRC/tests/capture/lsan-hdf5.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
"$PY" "$SRC/tests/fuzz/corrupt.py" "$SRC/datasets/synth-tiny.h5" "${1:-1000}" \
    --seed "${FP4S_CORRUPT_SEED:-$(date +%s)}" --timeout 10 > "$T/summary.json" || {
    cat "$T/summary.json"; fail "corruption fuzz"; }
"$PY" - "$T/summary.json" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
print("corruptions %d (seed %d) of %d live metadata bytes, per category %s" % (
    j["corruptions"], j["seed"], j["metadata_bytes"], j["tried_per_category"]))
print("tool runs %d: signals %d, hangs %d, other exits %d, inputs changed %d" % (
    j["tool_runs"], j["signals"], j["hangs"], j["other_exits"], j["inputs_changed"]))
print("exit codes: %s" % j["exit_codes"])
PYEOF
echo ok
