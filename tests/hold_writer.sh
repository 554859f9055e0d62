# Sourced by the shell tests that need a live capture writer (POSIX sh; T and
# fail come from their prelude).
#   hold_writer FILE   start tests/capture/hold_writer in the background: it
#                      creates the capture FILE, flushes one step and holds it
#                      until $T/stop appears; returns once it is ready ($T/ready),
#                      writer = its pid (touch "$T/stop"; wait $writer)
hold_writer() {
    "${FP4S_BUILDDIR:?}/tests/capture/hold_writer" "$1" "$T/ready" "$T/stop" &
    writer=$!
    hold_n=0
    while [ ! -e "$T/ready" ]; do
        hold_n=$((hold_n + 1)); [ $hold_n -lt 500 ] || fail "the writer did not start"; sleep 0.02
    done
}
