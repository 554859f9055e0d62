#!/bin/sh
# Valid HDF5 files are read, never refused as damaged (issue 24 item 1). A
# corpus written at test time by h5py (h5corpus.py: both file formats, every
# storage, every filter libhdf5 ships, empty and zero-size datasets, strings,
# attributes, links, virtual datasets) and the shipped capture rewritten with
# each storage and filter. Before the fix the HDF5 guard's child divided by
# zero on a dataset with a zero-size dimension and crashed libhdf5 (H5Ocopy of
# an open scale-offset dataset) on a scale-offset one, and refused every
# dataset of those files as "damaged HDF5 file: the HDF5 library crashed",
# glibc's "munmap_chunk(): invalid pointer" on stderr.
#   every float tensor: fp4-quant --pad exits 0, and reads the same numbers as
#     the plain copy of the same data (stored losslessly otherwise);
#   an empty one: exit 3 "is empty"; a scalar or a non-float: exit 3 naming
#     what it expected; LZF (h5py's own filter): exit 3, not "damaged";
#   never "damaged", never a signal, nothing on stderr but the tool's lines;
#   a dataset created and never written, whose shape claims far more than the
#   file holds (all fill value), refuses no other dataset of its file (before:
#   "damaged: its shape ... claims more data than the file stores");
#   each rewritten capture: fp4-capture ls and fp4-compare exit 0, and print
#     what they print for the original when the rewrite is lossless.
. "$(dirname "$0")/../lib.sh"
. "$SRC/tests/python.sh"
count_failures
"$PY" "$SRC/tests/io/h5corpus.py" "$T/c" "$SRC/datasets/synth-tiny.h5"
n_read=0 n_other=0
# the signature of what a read saw: every line of the table but the name, the
# shape and the stored type
sig() { sed -e '1d' -e '/^  shape /d' -e '/stored dtype/d' out.txt; }
clean_stderr() {
    # only the tool's own lines: "fp4-quant: ..." (libhdf5 and glibc print none)
    if grep -v '^fp4-[a-z]*: ' err.txt | grep -q .; then
        fail "$1: stderr holds more than the tool's message: $(cat err.txt)"
    fi
}
while IFS="$(printf '\t')" read -r file path want group; do
    spec="$T/c/$file:$path"
    set +e
    fp4-quant --pad "$spec" > out.txt 2> err.txt
    rc=$?
    set -e
    clean_stderr "$spec"
    if grep -q "damaged" err.txt; then
        fail "$spec: a valid file refused: $(cat err.txt)"
        continue
    fi
    case $want in
    read)
        n_read=$((n_read + 1))
        if [ "$rc" != 0 ]; then
            fail "$spec: exit $rc: $(cat err.txt)"
            continue
        fi
        case $group in
        -) ;;
        *~) # lossy: read, no value check
            ;;
        *)
            sig > "sig.txt"
            if [ -f "$T/ref-$group" ]; then
                cmp -s "$T/ref-$group" sig.txt || fail "$spec: read other values than the rest of group $group"
            else
                cp sig.txt "$T/ref-$group"
            fi
            ;;
        esac
        ;;
    empty)
        n_other=$((n_other + 1))
        [ "$rc" = 3 ] && grep -q "is empty" err.txt || fail "$spec: empty: exit $rc, $(cat err.txt)"
        ;;
    scalar | other | nofilter)
        n_other=$((n_other + 1))
        [ "$rc" = 3 ] || fail "$spec: $want: exit $rc (expected 3): $(cat err.txt)"
        grep -q "$path" err.txt || fail "$spec: the message does not name the dataset: $(cat err.txt)"
        # the type named in words (it said "class 7 dataset is not supported")
        ! grep -q "class [0-9]" err.txt || fail "$spec: an HDF5 class number for a type: $(cat err.txt)"
        ;;
    esac
done < "$T/c/manifest.tsv"
[ "$n_read" -ge 70 ] || fail "only $n_read float datasets in the corpus"
echo "ok: $n_read float datasets read, $n_other others refused with their reason"

# a capture, rewritten with each storage and filter
fp4-capture ls "$SRC/datasets/synth-tiny.h5" > ls-ref.txt
fp4-compare "$SRC/datasets/synth-tiny.h5" > cmp-ref.txt
while IFS="$(printf '\t')" read -r variant kind; do
    cap="$T/c/cap-$variant.h5"
    for tool in "fp4-capture ls" fp4-compare fp4-mismatch; do
        set +e
        $tool "$cap" > out.txt 2> err.txt
        rc=$?
        set -e
        clean_stderr "$tool $cap"
        [ "$rc" = 0 ] || { fail "$tool cap-$variant.h5: exit $rc: $(cat err.txt)"; continue; }
        [ "$kind" = lossless ] || continue
        case $tool in
        "fp4-capture ls") sed "s|$T/c/cap-$variant.h5|FILE|" out.txt > a.txt
            sed "s|$SRC/datasets/synth-tiny.h5|FILE|" ls-ref.txt > b.txt
            cmp -s a.txt b.txt || fail "fp4-capture ls cap-$variant.h5 lists another capture: $(diff b.txt a.txt | head -5)" ;;
        fp4-compare) sed "s|$T/c/cap-$variant.h5|FILE|" out.txt > a.txt
            sed "s|$SRC/datasets/synth-tiny.h5|FILE|" cmp-ref.txt > b.txt
            cmp -s a.txt b.txt || fail "fp4-compare cap-$variant.h5 differs: $(diff b.txt a.txt | head -5)" ;;
        esac
    done
done < "$T/c/captures.tsv"
echo "ok: the capture rewritten $(wc -l < "$T/c/captures.tsv") ways is read"
failures_end
