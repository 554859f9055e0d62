#!/bin/sh
# Run every command of the EXAMPLES sections of fp4-remedy(1) and
# fp4-compare(1) on small fixtures; each must exit 0 and print something.
. "${FP4S_SRCDIR:?}/tests/python.sh"
. "$FP4S_SRCDIR/tests/lib.sh"
# make_logits_capture (C, the library's capture writer) makes the logits capture
"$PY" - <<'PYEOF'
import numpy as np
rng = np.random.default_rng(3)
a = (rng.standard_normal((64, 256)) * np.where(np.arange(256) % 41 == 7, 25, 1)).astype(np.float32)
np.save("a.npy", a)
np.save("t.npy", (a * (1 + 1e-3 * rng.standard_normal(a.shape))).astype(np.float32))
np.save("w.npy", (0.05 * rng.standard_normal((96, 256))).astype(np.float32))
PYEOF
fp4-capture synth -o cap.h5 --seed 2 --layers 2 --experts 2 --top-k 1 --tokens 32 --hidden 64 \
    --out-features 32 --hot-channels 2 --steps 2 --act-every 1 --seqs 2 --seq-len 8 >/dev/null
"${FP4S_BUILDDIR:?}/tests/remedy/make_logits_capture" lg.h5
run_man_examples fp4-remedy.1 fp4-compare.1
[ -f rep.h5 ] || fail "the example's rep.h5 is missing"
echo "$n man-page examples ran"
