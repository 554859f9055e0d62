#!/bin/sh
# pip install . from the source tree into a fresh virtual environment
# (--system-site-packages: Debian's numpy, h5py and torch), without network
# (--no-build-isolation --no-index: Debian's meson-python builds it), and the
# wheel of the same build into a second one; then the package's tests run
# against each installed package and the library inside it, with no
# PYTHONPATH to the source and no FP4SCOPE_LIB. The fp4-* tools they compare
# with are this build's. -Dcuda=disabled: the CPU proof (the GPU machine's is
# scripts/device/py_check.sh). One compile serves both (builddir).
set -eu
. "$(dirname "$0")/../python.sh"
SRC=${FP4S_SRCDIR:?}
if ! "$PY" -c 'import mesonpy' 2>/dev/null; then
    echo "SKIP: $PY has no meson-python (Debian: python3-mesonpy)" >&2
    exit 77
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/fp4s-pip.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
if ! "$PY" -m venv --system-site-packages "$T/venv" > "$T/venv.log" 2>&1; then
    cat "$T/venv.log" >&2
    echo "SKIP: $PY -m venv cannot make an environment (Debian: python3-venv)" >&2
    exit 77
fi
"$PY" -m venv --system-site-packages "$T/venv2"
unset FP4SCOPE_LIB PYTHONPATH
# pip builds from a copy: meson-python 0.12 writes .mesonpy-native-file.ini into
# the tree it builds, and the tests must not change the source tree
mkdir "$T/src"
tar -C "$SRC" --exclude=./.git --exclude='./build*' --exclude='./_build*' --exclude=./.device \
    --exclude='./.mesonpy*' -cf - . | tar -C "$T/src" -xf -
cfg="--config-settings=builddir=$T/build --config-settings=setup-args=-Dcuda=disabled"
# shellcheck disable=SC2086
"$T/venv/bin/python" -m pip install --no-build-isolation --no-index $cfg "$T/src" > "$T/pip.log" 2>&1 ||
    { tail -40 "$T/pip.log"; echo "pip install . failed" >&2; exit 1; }
# shellcheck disable=SC2086
"$T/venv/bin/python" -m pip wheel --no-build-isolation --no-index --no-deps $cfg -w "$T/dist" "$T/src" \
    > "$T/wheel.log" 2>&1 || { tail -40 "$T/wheel.log"; echo "pip wheel . failed" >&2; exit 1; }
"$T/venv2/bin/python" -m pip install --no-index --no-deps "$T"/dist/fp4scope-*.whl > "$T/pip2.log" 2>&1 ||
    { tail -40 "$T/pip2.log"; echo "installing the wheel failed" >&2; exit 1; }
ls "$T/dist"
want=$(sed -n 's/^#define FP4S_VERSION_STRING "\(.*\)"$/\1/p' "$SRC/lib/include/fp4scope/version.h")
for v in venv venv2; do
    # the installed package, its own library, the library's version
    (cd "$T" && "$T/$v/bin/python" - "$T/$v" "$want" <<'PY'
import importlib.metadata, os, sys
import fp4scope
root, want = sys.argv[1], sys.argv[2]
assert fp4scope.__file__.startswith(root), fp4scope.__file__
assert fp4scope.lib_path() == os.path.join(os.path.dirname(fp4scope.__file__), "libfp4scope.so"), fp4scope.lib_path()
assert fp4scope.__version__ == want == importlib.metadata.version("fp4scope"), (fp4scope.__version__, want)
print("%s: fp4scope %s from %s" % (os.path.basename(root), fp4scope.__version__, fp4scope.lib_path()))
PY
    )
done
cd "$T"
export PYTHONPATH="$SRC/tests/python"
rc=0
for t in binding quant analysis qat monitor tensorboard docs; do
    echo "== venv (pip install .): test_$t"
    "$T/venv/bin/python" "$SRC/tests/python/test_$t.py" || rc=1
done
for t in binding quant; do
    echo "== venv2 (the wheel): test_$t"
    "$T/venv2/bin/python" "$SRC/tests/python/test_$t.py" || rc=1
done
exit $rc
