#!/bin/sh
# Run every command of the EXAMPLES sections of fp4-decompose(1) and
# fp4-channels(1) on small fixtures; each must exit 0 and print something.
. "${FP4S_SRCDIR:?}/tests/python.sh"
. "$FP4S_SRCDIR/tests/lib.sh"
"$PY" - <<'EOF'
import numpy as np, h5py
rng = np.random.default_rng(9)
np.save("w.npy", rng.standard_normal((64, 256)).astype(np.float32))
np.save("a.npy", (rng.standard_normal((128, 256)) * np.where(np.arange(256) % 37 == 0, 8, 1)).astype(np.float32))
with h5py.File("cap.h5", "w") as f:
    f.attrs["fp4scope_schema"] = "fp4scope-capture/1"
    f.attrs["producer"] = "man_examples.sh"
    f.attrs["synthetic"] = 1
    for step in range(4):
        for site in ("layers.0.mlp.up_proj", "layers.1.mlp.down_proj", "layers.1.attn.o_proj"):
            g = f.create_group(f"steps/{step}/{site}")
            g["trainer"] = rng.standard_normal((16, 64)).astype(np.float32)
            g["rollout"] = rng.standard_normal((16, 64)).astype(np.float32)
EOF
run_man_examples fp4-decompose.1 fp4-channels.1
[ -f rep.h5 ] && [ -f set.h5 ] && [ -f set.json ] || fail "example outputs missing"
echo "$n man-page examples ran"
