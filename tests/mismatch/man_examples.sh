# Sourced: run_man_examples PAGE runs every command line of the EXAMPLES
# section (between .EX and .EE, lines starting with "fp4-") in the temporary
# directory, with datasets/ linked to the source tree's; each must exit 0.
run_man_examples() {
    page=$SRC/man/$1
    [ -f "$page" ] || fail "$page missing"
    ln -sf "$SRC/datasets" datasets
    awk '/^\.SH EXAMPLES/{s=1;next} /^\.SH/{s=0} s&&/^\.EX/{e=1;next} s&&/^\.EE/{e=0;next} s&&e&&/^fp4-/{print}' \
        "$page" > examples.txt
    n=$(wc -l < examples.txt)
    [ "$n" -ge 1 ] || fail "$1: no examples found"
    while IFS= read -r cmd; do
        echo "+ $cmd"
        sh -c "$cmd" > example.out 2> example.err || { cat example.err >&2; fail "$1 example failed: $cmd"; }
        [ -s example.out ] || ls | grep -q . || fail "$1 example printed nothing: $cmd"
    done < examples.txt
    echo "$n examples of $1 ran"
}
