#!/bin/sh
# scripts/gpu/rl_sweep.sh's job lists (RL_LIST=1, nothing is built or run): every
# phase has the runs its comment names, each line is one run when xargs -L 1 reads
# it (a line ending in a blank was joined with the next one: phase d's BF16 runs
# became one run of eight runs' options, which exited 2), RL_ONLY and RL_SMOKE
# filter and shrink them, and an unknown phase or a filter matching nothing exit 2.
set -u
cd "$(dirname "$0")/../.." || exit 1
S=scripts/gpu/rl_sweep.sh
fail=0
bad() { echo "FAIL: $*"; fail=1; }
for spec in a:16 b:16 c:16 d:16 t:2; do
    ph=${spec%%:*} want=${spec#*:}
    out=$(RL_LIST=1 sh "$S" "$ph") || bad "phase $ph: exit $?"
    n=$(printf '%s\n' "$out" | grep -c .)
    [ "$n" = "$want" ] || bad "phase $ph: $n job lines, want $want"
    x=$(printf '%s\n' "$out" | xargs -L 1 echo run | grep -c '^run ')
    [ "$x" = "$want" ] || bad "phase $ph: xargs -L 1 sees $x runs in $want lines"
    printf '%s\n' "$out" | grep -q '[[:space:]]$' && bad "phase $ph: a job line ends in a blank"
    names=$(printf '%s\n' "$out" | cut -d' ' -f1 | sort -u | grep -c .)
    [ "$names" = "$want" ] || bad "phase $ph: $names distinct run names for $want jobs"
done
# the BF16 runs of phase d, and nothing else
out=$(RL_LIST=1 RL_ONLY='.*\.bf16\..*' sh "$S" d)
[ "$(printf '%s\n' "$out" | grep -c .)" = 8 ] || bad "RL_ONLY bf16 of phase d: not 8 lines"
printf '%s\n' "$out" | grep -q nvfp4 && bad "RL_ONLY bf16 of phase d kept an nvfp4 run"
printf '%s\n' "$out" | grep -q -- '--rollout' && bad "RL_ONLY bf16 of phase d: a BF16 run has --rollout"
# later options win: the smoke runs end in the tiny model
RL_LIST=1 RL_SMOKE=1 sh "$S" b | grep -v -- '--steps 3 --sft-max-steps 3 --eval-every 2 --eval-prompts 8$' | grep -q . \
    && bad "RL_SMOKE left a job line without the tiny options at its end"
RL_LIST=1 sh "$S" z > /dev/null 2>&1; rc=$?
[ "$rc" = 2 ] || bad "unknown phase: exit $rc, want 2"
RL_LIST=1 RL_ONLY='nothing' sh "$S" a > /dev/null 2>&1; rc=$?
[ "$rc" = 0 ] || true   # RL_LIST prints what matches: nothing, status of grep ignored
# listing makes no output folder (it made ./out-rl in the source tree)
t=$(mktemp -d)
OUT=$t/out RL_LIST=1 sh "$S" a > /dev/null
[ -e "$t/out" ] && bad "RL_LIST=1 made the output folder \$OUT"
rm -rf "$t"
[ $fail = 0 ] && echo "sweep job lists: ok"
exit $fail
