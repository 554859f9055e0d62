# Sourced by the test scripts that need python: PY, the python3 that meson
# found for the tests (-Dpython, else python3 on PATH, else /usr/bin/python3,
# with numpy and h5py: tests/meson.build), passed as FP4S_PYTHON. Without one
# the test is skipped (exit 77). py_shim DIR writes DIR/python3, a script that
# runs $PY (for commands that say "python3"; a script, not a symlink, so that a
# virtual environment's python keeps its environment).
PY=${FP4S_PYTHON:-}
if [ -z "$PY" ]; then
    echo "SKIP: no python3 with numpy and h5py for the tests (meson -Dpython=PATH)" >&2
    exit 77
fi
py_shim() {
    mkdir -p "$1"
    printf '#!/bin/sh\nexec "%s" "$@"\n' "$PY" > "$1/python3"
    chmod +x "$1/python3"
}
