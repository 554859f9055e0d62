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
echo ok
