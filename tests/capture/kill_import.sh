#!/bin/sh
# fp4-capture import -a SIGKILLed at random moments (fp4-capture(1), FILES;
# fp4scope-capture(5), Crash safety): the steps the capture had keep their
# bytes, a new step is complete or absent, the capture lists, checks and
# takes appends again. FP4S_KILL_ROUNDS rounds (default 8).
. "$(dirname "$0")/common.sh"
"$PY" - "$T" "${FP4S_KILL_ROUNDS:-8}" <<'PYEOF'
import os, random, shutil, signal, subprocess, sys, time
import h5py, numpy as np
T, rounds = sys.argv[1], int(sys.argv[2])
big = np.random.default_rng(1).standard_normal((8192, 1024), dtype=np.float32)
np.save(f'{T}/big.npy', big)
small = np.arange(64, dtype=np.float32).reshape(2, 32)
np.save(f'{T}/x.npy', small)
def run(*a, **kw):
    return subprocess.run(['fp4-capture', *a], capture_output=True, text=True, **kw)
r = run('import', f'{T}/x.npy', '-o', f'{T}/base.h5', '--step', '0', '--side', 'trainer', '--site', 'a')
assert r.returncode == 0, r.stderr
cmd = ['fp4-capture', 'import', '-a', f'{T}/big.npy', '-o', f'{T}/c.h5', '--step', '1', '--side', 'trainer',
       '--site', 'b']
shutil.copy(f'{T}/base.h5', f'{T}/c.h5')
t0 = time.monotonic()
subprocess.run(cmd, check=True, capture_output=True)
full = time.monotonic() - t0
rng = random.Random(os.getpid())
killed = landed = 0
for k in range(rounds):
    shutil.copy(f'{T}/base.h5', f'{T}/c.h5')
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(rng.uniform(0, 1.2 * full))
    p.send_signal(signal.SIGKILL)
    p.wait()
    killed += p.returncode == -signal.SIGKILL
    # the import's helper child (the HDF5 guard) dies with it, a moment later:
    # the lock it shares is gone once that child has exited
    for wait in range(100):
        try:
            f = h5py.File(f'{T}/c.h5', 'r')
            break
        except BlockingIOError:
            time.sleep(0.02)
    else:
        raise AssertionError(f'round {k}: the capture is still locked 2 s after the kill')
    with f:
        a = f['/steps/0/a/trainer'][()]
        assert a.dtype == np.float32 and a.tobytes() == small.tobytes(), f'round {k}: step 0 changed'
        if '1' in f['steps'] and 'b' in f['/steps/1']:
            b = f['/steps/1/b/trainer'][()]
            assert b.tobytes() == big.tobytes(), f'round {k}: step 1 listed but not complete'
            landed += 1
    r = run('ls', '--check', f'{T}/c.h5')
    assert r.returncode == 0, f'round {k}: ls --check: {r.stderr}'
    r = run('import', '-a', f'{T}/x.npy', '-o', f'{T}/c.h5', '--step', '2', '--side', 'trainer', '--site', 'a')
    assert r.returncode == 0, f'round {k}: append after the kill: {r.stderr}'
print(f'import -a: {rounds} rounds, {killed} killed by SIGKILL, step 1 complete in {landed}, '
      f'nothing of step 0 lost')
PYEOF
echo ok
