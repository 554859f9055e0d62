# Sourced: run_man_examples PAGE runs every command of the EXAMPLES section
# (man_examples, tests/lib.sh) in the temporary directory, with datasets/
# linked to the source tree's; each must exit 0 (some write only files).
run_man_examples() {
    page=$SRC/man/$1
    [ -f "$page" ] || fail "$page missing"
    ln -sf "$SRC/datasets" datasets
    man_examples "$1" > examples.txt
    n=$(wc -l < examples.txt)
    [ "$n" -ge 1 ] || fail "$1: no examples found"
    while IFS= read -r cmd; do
        echo "+ $cmd"
        sh -c "$cmd" > example.out 2> example.err || { cat example.err >&2; fail "$1 example failed: $cmd"; }
    done < examples.txt
    echo "$n examples of $1 ran"
}
