#!/bin/sh
# README.md's install commands (the block after "Install it with pip", as
# written there: a fresh virtual environment with --system-site-packages for
# Debian's numpy, h5py and torch; pip install . and pip wheel . without
# network, --no-build-isolation --no-index: Debian's meson-python builds it),
# run with this test's python3 for "python3", $T/venv for ~/venv/fp4 and a
# copy of the source tree as the working directory; the wheel is installed
# alone into a second environment. Then the package's tests run against each
# installed package and the library inside it, with no PYTHONPATH to the
# source and no FP4SCOPE_LIB; the fp4-* tools they compare with are this
# build's. Each pip command gets two build options: one build directory for
# both, and -Dcuda=disabled (the CPU proof; the GPU machine's is
# scripts/device/py_check.sh). The installed package must hold every module
# of tools/python/fp4scope (tools/python/meson.build lists them).
set -eu
. "$(dirname "$0")/../python.sh"
SRC=${FP4S_SRCDIR:?}
if ! "$PY" -c 'import mesonpy' 2>/dev/null; then
    echo "SKIP: $PY has no meson-python (Debian: python3-mesonpy)" >&2
    exit 77
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/fp4s-pip.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
# shellcheck disable=SC2016
readme=$(sed -n '/^Install it with pip from the source tree/,/^`--system-site-packages`/p' "$SRC/README.md" |
    sed -n 's/^    //p')
if [ "$(printf '%s\n' "$readme" | grep -c .)" -ne 3 ]; then
    printf '%s\n' "$readme" >&2
    echo "README.md: expected 3 indented install commands after 'Install it with pip'" >&2
    exit 1
fi
# pip builds from a copy: meson-python 0.12 writes .mesonpy-native-file.ini into
# the tree it builds, and the tests must not change the source tree
mkdir "$T/src"
tar -C "$SRC" --exclude=./.git --exclude='./build*' --exclude='./_build*' --exclude=./.device \
    --exclude='./.mesonpy*' -cf - . | tar -C "$T/src" -xf -
unset FP4SCOPE_LIB PYTHONPATH
cfg="--config-settings=builddir=$T/build --config-settings=setup-args=-Dcuda=disabled"
printf '%s\n' "$readme" > "$T/readme.txt"
i=0
while IFS= read -r line; do
    i=$((i + 1))
    cmd=$(printf '%s' "${line%%#*}" | sed -e "s|~/venv/fp4|$T/venv|g" -e 's/[[:space:]]*$//')
    case $cmd in
    "python3 -m venv "*)
        if ! (cd "$T/src" && eval "\"\$PY\" ${cmd#python3 }") > "$T/cmd$i.log" 2>&1; then
            cat "$T/cmd$i.log" >&2
            echo "SKIP: $PY -m venv cannot make an environment (Debian: python3-venv)" >&2
            exit 77
        fi ;;
    *"/bin/pip "*)
        echo "README: $line"
        (cd "$T/src" && eval "$cmd $cfg") > "$T/cmd$i.log" 2>&1 ||
            { tail -40 "$T/cmd$i.log"; echo "README.md's '$line' failed" >&2; exit 1; } ;;
    *) echo "README.md: an install command this test does not know: $line" >&2; exit 1 ;;
    esac
done < "$T/readme.txt"
"$PY" -m venv --system-site-packages "$T/venv2"
ls "$T/src/dist"
"$T/venv2/bin/python" -m pip install --no-index --no-deps "$T"/src/dist/fp4scope-*.whl > "$T/pip2.log" 2>&1 ||
    { tail -40 "$T/pip2.log"; echo "installing the wheel failed" >&2; exit 1; }
want=$(sed -n 's/^#define FP4S_VERSION_STRING "\(.*\)"$/\1/p' "$SRC/lib/include/fp4scope/version.h")
for v in venv venv2; do
    # the installed package, its own library, the library's version, every module
    (cd "$T" && "$T/$v/bin/python" - "$T/$v" "$want" "$SRC/tools/python/fp4scope" <<'PY'
import importlib.metadata, os, sys
import fp4scope
root, want, src = sys.argv[1:4]
assert fp4scope.__file__.startswith(root), fp4scope.__file__
here = os.path.dirname(fp4scope.__file__)
assert fp4scope.lib_path() == os.path.join(here, "libfp4scope.so"), fp4scope.lib_path()
assert fp4scope.__version__ == want == importlib.metadata.version("fp4scope"), (fp4scope.__version__, want)
mods = lambda d: sorted(f for f in os.listdir(d) if f.endswith(".py"))
missing = sorted(set(mods(src)) - set(mods(here)))
assert not missing, "not installed (tools/python/meson.build): %s" % ", ".join(missing)
print("%s: fp4scope %s from %s, %d modules" % (os.path.basename(root), fp4scope.__version__, fp4scope.lib_path(),
                                               len(mods(here))))
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
