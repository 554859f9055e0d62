#!/bin/sh
# The progress line (cli.c): on a terminal, long work draws
# "prog: WHAT NN% (...)" on stderr and erases it before the report; --quiet
# and a stderr that is not a terminal show nothing.
set -eu
. "$FP4S_SRCDIR/tests/cli/common.sh"
$PY -c "
import numpy as np
rng = np.random.default_rng(1)
np.save('x.in.npy', rng.standard_normal((1024, 2048)).astype('<f4'))
np.save('y.in.npy', rng.standard_normal((256, 2048)).astype('<f4'))
np.save('z.in.npy', rng.standard_normal((3072, 2048)).astype('<f4'))  # import reads blocks of 8 MiB
with open('t.in.csv', 'w') as f:
    f.write('step,seq,trainer_logprob,rollout_logprob\n')
    for s in range(400):
        f.write(''.join(f'{s},{t % 7},-1.0,-1.001\n' for t in range(2000)))
"

# run_pty CMD ; CMD ; ...: each CMD in turn with stderr on a pseudo-terminal,
# stopped for 0.6 s (SIGSTOP, SIGCONT) once it has used 30 ms of CPU and again
# after every further 40 ms, so that the line is due however fast the machine
# is (one stop was not enough: a start that itself took 30 ms of CPU, loading
# the libraries a build links, was stopped before the work and its progress
# line began, and the work that followed was over in less than the line's
# 0.5 s); CMD i's stderr goes to pty.I, stdout to out.I, the exit statuses
# (one per line) to status.txt
run_pty() {
    $PY - "$@" <<'PY'
import os, pty, shlex, signal, sys, time
cmds = [shlex.split(c) for c in ' '.join(sys.argv[1:]).split(';')]
tick = os.sysconf('SC_CLK_TCK')
def cpu(pid):
    try:
        f = open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()
        return (int(f[11]) + int(f[12])) / tick
    except (OSError, IndexError, ValueError):
        return None
status = []
for i, argv in enumerate(cmds):
    master, slave = pty.openpty()
    out = os.open('out.%d' % i, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    pid = os.fork()
    if pid == 0:
        os.dup2(slave, 2)
        os.dup2(out, 1)
        os.execvp(argv[0], argv)
    os.close(slave)
    os.close(out)
    os.set_blocking(master, False)
    data, st, stopped, next_stop = b'', None, False, 0.03
    while st is None:
        done, w = os.waitpid(pid, os.WNOHANG)
        if done:
            st = os.waitstatus_to_exitcode(w)
            break
        c = cpu(pid)
        if c is not None and c >= next_stop:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.6)
            os.kill(pid, signal.SIGCONT)
            stopped, next_stop = True, c + 0.04
        try:
            data += os.read(master, 65536)
        except (BlockingIOError, OSError):
            pass
        time.sleep(0.005)
    while True:
        try:
            chunk = os.read(master, 65536)
        except (BlockingIOError, OSError):
            break
        if not chunk:
            break
        data += chunk
    open('pty.%d' % i, 'wb').write(data)
    status.append('%d %d' % (st, stopped))
open('status.txt', 'w').write('\n'.join(status) + '\n')
PY
}

run_pty "fp4-quant --ref --threads 1 --chunk-rows 16 -f nvfp4 x.in.npy" \; \
        "fp4-decompose --threads 1 --chunk 16384 --by channel y.in.npy" \; \
        "fp4-channels --threads 1 --chunk 16384 y.in.npy" \; \
        "fp4-mismatch t.in.csv" \; \
        "fp4-capture import z.in.npy -o c.h5 --step 0 --side trainer --gzip 1" \; \
        "fp4-quant --ref --threads 1 --chunk-rows 16 -f nvfp4 --quiet x.in.npy" \; \
        "fp4-quant --ref --threads 1 --chunk-rows 16 --json y.in.npy"
[ "$(grep -c '^0 ' status.txt)" = 7 ] || { cat status.txt >&2; fail "a run failed"; }
i=0
for tool in fp4-quant fp4-decompose fp4-channels fp4-mismatch fp4-capture; do
    # a run that ended before it had used 30 ms of CPU was never stopped
    sed -n "$((i + 1))p" status.txt | grep -q ' 1$' || fail "$tool ended too soon to be stopped: a larger input"
    $PY - "$tool" "pty.$i" <<'PY'
import re, sys
d = open(sys.argv[2], 'rb').read().decode('utf-8', 'replace')
# drawn with a percentage, and erased at the end
assert re.search(r'\r%s: .* +\d+%% \(' % re.escape(sys.argv[1]), d), (sys.argv[1], repr(d[-400:]))
assert d.endswith('\r\x1b[K'), (sys.argv[1], repr(d[-80:]))
PY
    i=$((i + 1))
done
sed -n 6p status.txt | grep -q ' 1$' || fail "the --quiet run ended too soon to be stopped"
[ ! -s pty.5 ] || { cat -v pty.5 >&2; fail "--quiet drew a progress line"; }
$PY -c "import json; json.load(open('out.6'))" || fail "the JSON on stdout is not intact"
# not a terminal: nothing
fp4-quant --ref --threads 1 --chunk-rows 16 y.in.npy >/dev/null 2>err.txt
[ ! -s err.txt ] || fail "progress on a stderr that is not a terminal"
echo ok
