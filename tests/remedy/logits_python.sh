#!/bin/sh
# The logits capture through the Python adapter (make_logits_capture.py:
# Capture.put_tokens, put_logprobs, fake_quant) reads back in fp4-remedy --logits
# like the one of the C writer (make_logits_capture.c). Suite python: the
# adapter loads libfp4scope.so through ctypes.
set -eu
. "${FP4S_SRCDIR:?}/tests/python.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
FP4SCOPE_LIB="${FP4S_BUILDDIR:?}/libfp4scope.so" "$PY" "$FP4S_SRCDIR/tests/remedy/make_logits_capture.py" py.h5 6
"$FP4S_BUILDDIR/tests/remedy/make_logits_capture" c.h5 6
for f in py.h5 c.h5; do
    fp4-remedy -f nvfp4 --logits --remedy none,rac:1:bf16 --json "$f" > "$f.json"
done
"$PY" - <<'PYEOF'
import json
for f in ("py.h5", "c.h5"):
    d = json.load(open(f + ".json"))
    assert [r["remedy"] for r in d] == ["none", "rac:1:bf16"] * 4, (f, [r["remedy"] for r in d])
    pooled = [r for r in d if r["step"] is None]
    assert pooled[1]["max_abs"] < pooled[0]["max_abs"], (f, pooled)
print("logits_python: the adapter's and the C writer's captures both read back")
PYEOF
