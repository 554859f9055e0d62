#!/bin/sh
# fp4scope-formats(7), ENGINES COMPARED and EXAMPLES: the page holds exactly the
# rows engine_diff computes on the shipped captures, and each example runs.
#   formats_page.sh ENGINE_DIFF
set -eu
diff=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
page="$FP4S_SRCDIR/man/fp4scope-formats.7"
d="$FP4S_SRCDIR/datasets"
caps="$d/moe-h200.h5 $d/synth-moe.h5 $d/synth-tiny.h5 $d/synth-dense-f32.h5"
"$diff" --check "$page" -f mxfp4 -p ocp,ceil,modelopt,vllm,vllm@pre-43557,aiter@pre-3212,brevitas-ceil $caps
"$diff" --check "$page" -f nvfp4 -p te,torchao,torchao@0.16,modelopt,flashinfer $caps
# the classes the page calls identical are identical
"$diff" --roff -f mxfp4 -p ocp,torchao,ceil,te,flashinfer,flashinfer-exact,trtllm,aiter,vllm,quark $caps >cls.txt
grep -q '^identical: ocp=torchao ceil=te ceil=flashinfer ceil=flashinfer-exact ceil=trtllm ceil=aiter te=flashinfer te=flashinfer-exact te=trtllm te=aiter flashinfer=flashinfer-exact flashinfer=trtllm flashinfer=aiter flashinfer-exact=trtllm flashinfer-exact=aiter trtllm=aiter vllm=quark$' cls.txt ||
    { cat cls.txt >&2; echo "formats_page.sh: the MXFP4 classes are not those of the page" >&2; exit 1; }
"$diff" --roff -f nvfp4 -p te,flashinfer-exact,flashinfer,trtllm,vllm,sglang $caps >cls.txt
grep -q '^identical: te=flashinfer-exact flashinfer=trtllm flashinfer=vllm flashinfer=sglang trtllm=vllm trtllm=sglang vllm=sglang$' cls.txt ||
    { cat cls.txt >&2; echo "formats_page.sh: the NVFP4 classes are not those of the page" >&2; exit 1; }
grep -q '(275 tensors, 180608 blocks, 2889728 elements)' cls.txt || { echo "formats_page.sh: not the page's totals" >&2; exit 1; }
# the examples (fp4-quant is built with jansson)
if command -v fp4-quant >/dev/null 2>&1; then
    sed -n '/^\.SH EXAMPLES/,/^\.SH COUNTERS/p' "$page" | sed -n '/^\.EX/,/^\.EE/p' |
        grep -v -e '^\.EX' -e '^\.EE' | sed -e 's/\\-/-/g' >examples.txt
    n=$(wc -l <examples.txt)
    [ "$n" -eq 3 ] || { echo "formats_page.sh: expected 3 examples, found $n" >&2; exit 1; }
    while IFS= read -r cmd; do
        (cd "$FP4S_SRCDIR" && sh -c "$cmd") >ex.out 2>ex.err || { cat ex.out ex.err >&2; echo "example failed: $cmd" >&2; exit 1; }
        [ -s ex.out ] || { echo "example printed nothing: $cmd" >&2; exit 1; }
        echo "example ok: $cmd"
    done <examples.txt
fi
# --list-profiles: each profile's engine, version, device and source; the
# ENGINE VERSIONS table's earlier behaviours are profiles, and every versioned
# profile (name@release, with -cuda for its CUDA variant) is in that table
if command -v fp4-quant >/dev/null 2>&1; then
    fp4-quant --list-profiles >profiles.txt
    awk '/^[^ ]/ { if (name != "" && n != 4) bad = bad " " name; name = $1; n = 0; next }
         /^  (engine|version|device|source) +[^ ]/ { n++ }
         END { if (name == "") bad = " (none)"; if (bad != "") { print "formats_page.sh: --list-profiles lacks engine/version/device/source for" bad; exit 1 } }' \
        profiles.txt >&2
    field() { awk -v p="$1" -v f="$2" '/^[^ ]/ { in_p = $1 == p; next } in_p && $1 == f { $1 = ""; sub(/^ +/, ""); print; exit }' profiles.txt; }
    [ "$(field torchao device)" = cpu ] && [ "$(field torchao-cuda device)" = cuda ] ||
        { echo "formats_page.sh: torchao / torchao-cuda do not list devices cpu / cuda" >&2; exit 1; }
    case $(field torchao@0.16 version) in *0.16*) ;; *) echo "formats_page.sh: torchao@0.16 lists no 0.16 version" >&2; exit 1 ;; esac
    names=$(grep -E '^[^ ]' profiles.txt | awk '{ print $1 }')
    sed -n '/^\.SH ENGINE VERSIONS/,/^\.TE/p' "$page" | grep '^T}' | cut -f2 | awk '{ print $1 }' | grep -v '^\\-$' >earlier.txt
    [ "$(grep -c . earlier.txt)" -ge 6 ] || { echo "formats_page.sh: ENGINE VERSIONS table not found" >&2; exit 1; }
    while read -r e; do
        echo "$names" | grep -qxF "$e" || { echo "formats_page.sh: ENGINE VERSIONS names '$e', not a profile" >&2; exit 1; }
        [ "$(field "$e" version)" != "-" ] || { echo "formats_page.sh: $e lists no version" >&2; exit 1; }
    done <earlier.txt
    for n in $(echo "$names" | grep '@'); do
        grep -qxF "$(echo "$n" | sed 's/-cuda@/@/')" earlier.txt ||
            { echo "formats_page.sh: versioned profile $n is not in the ENGINE VERSIONS table" >&2; exit 1; }
    done
    echo "list-profiles ok: $(echo "$names" | grep -c .) profiles, $(grep -c . earlier.txt) earlier behaviours"
fi
echo ok
