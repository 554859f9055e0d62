# The golden cases: every tool on the shipped data (data/ = datasets/), on the
# parsers' corpus (corpus/ = tests/fuzz/corpus/) and on small inputs made here.
# Sourced by golden.sh, which defines c and the inputs (see its header).
#
#   c NAME KIND OUTPUTS COMMAND...
#     NAME     the expected file: expected/NAME.txt
#     KIND     mpi: also run under mpirun (the tools that split their work over
#              ranks); in: makes an input later cases read; -: neither
#     OUTPUTS  files, directories or globs the command writes (space-separated,
#              '-' for none); each is recorded after standard output and error
#
# Keep each output small enough to read in a diff (golden.sh stores a digest of
# one over $GOLDEN_LIMIT bytes): a few steps or sites, --top/--show.
tiny=data/synth-tiny.h5
moe=data/synth-moe.h5
h200=data/moe-h200.h5
dense=data/synth-dense-f32.h5
w=data/weight-small.npy
trace=data/traces/planted.csv
qkv=layers.0.self_attn.qkv_proj
up=layers.0.mlp.experts.0.up_proj

# ---- inputs made by the tools -----------------------------------------------------------
c synth in c.h5 fp4-capture synth -o c.h5 --seed 5 --layers 1 --experts 2 --top-k 1 --tokens 64 --hidden 64 \
    --out-features 32 --hot-channels 2 --steps 6 --act-every 2 --seqs 4 --seq-len 16 --onset 3
c rl-run in rl.h5 fp4-rl --width 32 --prompts 3 --group 4 --steps 5 --sft-max-steps 3 --eval-every 1 \
    --eval-prompts 8 -o rl.h5
c logits-capture in lg.h5 "$B/tests/remedy/make_logits_capture" lg.h5 6
c capture-import in imp.h5 fp4-capture import $w -o imp.h5 --step 0 --side weight --site w0
c capture-import-append in imp.h5 fp4-capture import "$tiny:/steps/1/$qkv/rollout" -o imp.h5 -a --step 1 \
    --side rollout --site w0

# ---- fp4-capture ------------------------------------------------------------------------
c capture-ls - - fp4-capture ls $moe --sites 'layers.0.*' --steps 0
c capture-ls-json - - fp4-capture ls --json --check $h200 --steps 1
c capture-ls-check - - fp4-capture ls --check imp.h5
c capture-merge - m.h5 fp4-capture merge imp.h5 "$tiny" -o m.h5
c capture-ls-merged - - fp4-capture ls m.h5 --steps 0,1

# ---- fp4-quant ----------------------------------------------------------------------------
c quant-diff - - fp4-quant -f nvfp4 -p te --diff torchao --show 4 $w
c quant-mxfp4-diff - - fp4-quant -f mxfp4 -p ocp --diff ceil --show 4 $w
c quant-json - - fp4-quant -f mxfp4 --json "$tiny:/weights/$qkv"
c quant-outputs - "q.h5 codes.npy scales.npy deq.npy" fp4-quant -f nvfp4 "$tiny:/weights/$qkv" -o q.h5 \
    --codes codes.npy --scales scales.npy --dequant deq.npy
c quant-fp8 - - fp4-quant -f fp8 --pad "$tiny:/steps/0/$up/rollout"

# ---- fp4-decompose ------------------------------------------------------------------------
c decompose-table mpi - fp4-decompose $tiny --steps 0
c decompose-channel-json mpi - fp4-decompose -f nvfp4 --by channel --json "$tiny:/steps/0/$qkv/rollout"
c decompose-row-csv mpi dec.h5 fp4-decompose -f nvfp4 --by row --csv --sites 'layers.0.self*' --steps 2 --sides rollout c.h5 \
    -o dec.h5
c decompose-block mpi - fp4-decompose --by block --steps 0 --sides rollout,weight --show 5 $dense
c decompose-h200 mpi - fp4-decompose -f nvfp4 -p te $h200 --steps 0 --sites 'layers.0.*'
c decompose-two-inputs mpi - fp4-decompose -p ceil --json $w "$tiny:/weights/$qkv"
c decompose-json-file in decj.json sh -c "fp4-decompose --json --steps 0 --sides rollout --sites '*qkv*' $tiny \
    > decj.json"

# ---- fp4-channels -------------------------------------------------------------------------
c channels-table mpi - fp4-channels -f nvfp4 -p te --ratio 0.125 --show 10 --weight "$moe:/weights/$qkv" \
    "$moe:/steps/0/$qkv/rollout"
c channels-json mpi - fp4-channels --json --top 5 "$tiny:/steps/0/$up/rollout"
c channels-csv-h5 mpi set.h5 fp4-channels -f nvfp4 --csv --weight "$tiny:/weights/$up" "$tiny:/steps/1/$up/rollout" \
    -o set.h5
c channels-hcp-json-file mpi set.json fp4-channels --score hcp --top 9 --weight "$tiny:/weights/$qkv" \
    "$tiny:/steps/0/$qkv/rollout" -o set.json

# ---- fp4-compare --------------------------------------------------------------------------
c compare-table mpi - fp4-compare $tiny --top 10
c compare-csv mpi - fp4-compare --csv $tiny --steps 0 --sites "$up"
c compare-json-file mpi cmp.json fp4-compare -f nvfp4 --json $tiny --steps 2 --sites "$qkv" -o cmp.json
c compare-moe mpi - fp4-compare $moe --top 10 --steps 0,3
c compare-h200 mpi - fp4-compare -f nvfp4 -p te $h200 --top 5
c compare-tensors mpi - fp4-compare --act "$tiny:/steps/0/$qkv/rollout" --trainer-act "$tiny:/steps/0/$qkv/trainer" \
    --weight "$tiny:/weights/$qkv" --top 5

# ---- fp4-remedy ---------------------------------------------------------------------------
c remedy-list-remedies - - fp4-remedy --list-remedies
c remedy-list-accels - - fp4-remedy --list-accels
c remedy-table mpi - fp4-remedy $tiny --steps 0
c remedy-csv mpi - fp4-remedy --csv -r none,rac:0.25,mbs:128,of:0.5,keep:1,aqn:0.1 $tiny --steps 1,3
c remedy-json-h5 mpi rem.h5 fp4-remedy --json -r bf16,wfq,none,rac:0.25 $tiny --steps 1 --sites "$qkv" -o rem.h5
c remedy-plan mpi - fp4-remedy --plan 0.1 $moe --steps 0
c remedy-plan-json mpi plan.json fp4-remedy --plan 0.05 --json -o plan.json c.h5
c remedy-plan-none-first mpi - fp4-remedy --remedy none,sr:1 --plan 0.1 $tiny
c remedy-plan-none-last mpi - fp4-remedy --remedy sr:1,none --plan 0.1 $tiny
c remedy-engines mpi - fp4-remedy -f nvfp4 -p te -r bf16,wfq,none,4over6,rht,sr:1,mbs:64 \
    --act "$tiny:/steps/0/$qkv/rollout" --trainer-act "$tiny:/steps/0/$qkv/trainer" --weight "$tiny:/weights/$qkv"
c remedy-h200 mpi - fp4-remedy -f nvfp4 -p te -r none,rac:0.125 --csv $h200 --steps 2 --sites 'layers.1.*'
c remedy-logits mpi - fp4-remedy -f nvfp4 -p te --logits -r none,rac:0.25 lg.h5
c remedy-logits-json mpi - fp4-remedy --logits --json -r none,mbs:128 --logits-trainer bf16 lg.h5 --steps 0
c error-remedy-logits mpi - fp4-remedy --logits $h200

# ---- fp4-mismatch -------------------------------------------------------------------------
c mismatch-table mpi - fp4-mismatch $moe $trace
c mismatch-json-by-position mpi - fp4-mismatch --json --by-position $tiny t.csv
c mismatch-csv mpi - fp4-mismatch --csv $tiny c.h5 $h200
c mismatch-every mpi - fp4-mismatch --every 10 $trace
c mismatch-gate mpi - fp4-mismatch --gate --baseline c.h5 $tiny rl.h5
c mismatch-scalars mpi mm.json fp4-mismatch --json rl.h5 sc.csv -o mm.json

# ---- fp4-plot (the script and data; images are not compared) ------------------------------
c plot-mismatch - "pm.*" fp4-plot mismatch $trace c.h5 -o pm.png --title "mismatch"
c plot-components - "pc.*" fp4-plot components decj.json -o pc.png
c plot-channels - "pch.*" fp4-plot channels set.json -o pch.png
c plot-hist - "ph.*" fp4-plot hist decj.json -o ph.png
c plot-dumb - - fp4-plot mismatch $trace --term dumb -o -

# ---- fp4-report ---------------------------------------------------------------------------
c report-tiny mpi rep fp4-report $tiny --trace $trace --steps 0,1 --drill 1 --top 3 -o rep
c report-nvfp4 mpi rep2 fp4-report c.h5 -f nvfp4 --drill 0 --profiles torchao,vllm --remedy none,rac:0.25 -o rep2

# ---- fp4-rl -------------------------------------------------------------------------------
c rl-json - rl2.h5 fp4-rl --width 32 --prompts 2 --group 4 --steps 3 --sft-max-steps 2 --eval-every 1 \
    --eval-prompts 4 --rollout nvfp4 --trainer wfq --seed 3 --json -o rl2.h5

# ---- errors: the message and the exit status --------------------------------------------------
c error-compare-shape mpi - fp4-compare --act $w --trainer-act "$tiny:/steps/0/$qkv/rollout" --weight $w
c error-remedy-item mpi - fp4-remedy -r bogus $tiny
c error-remedy-missing mpi - fp4-remedy --act missing.npy --weight $w
c error-remedy-capture-missing mpi - fp4-remedy --sites 'layers.0.self*' missing.h5
c error-decompose-empty mpi - fp4-decompose --sites nope $tiny
c error-channels-hcp mpi - fp4-channels --score hcp "$tiny:/steps/0/$qkv/rollout"
c error-mismatch-missing mpi - fp4-mismatch missing.csv

# ---- the parsers' corpus: every file through the tool that reads its kind ---------------------
c corpus-npy - - corpus fp4-quant npy ''
c corpus-safetensors - - corpus fp4-quant safetensors ':w'
c corpus-csv - - corpus fp4-mismatch csv ''
c corpus-jsonl - - corpus fp4-mismatch jsonl ''
