"""The examples of README.md ("In your training loop", each marked with an
<!-- example: NAME --> line before its code) and of fp4scope-python(7)
(EXAMPLES) run as written, each in a fresh interpreter in an empty
directory; the monitor example leaves its TensorBoard files, capture and
stats report there."""
import os
import re
import subprocess
import sys

from harness import TMP, Skip, run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def readme_examples():
    text = open(os.path.join(ROOT, "README.md")).read()
    out = re.findall(r"<!-- example: ([\w-]+) -->\n```python\n(.*?)```", text, re.S)
    assert len(out) >= 2, "README: the marked examples are missing"
    return out


def man_examples():
    text = open(os.path.join(ROOT, "man", "fp4scope-python.7")).read()
    ex = text.split(".SH EXAMPLES", 1)[1].split("\n.SH ", 1)[0]
    blocks = re.findall(r"\.nf\n(.*?)\.fi", ex, re.S)
    assert blocks, "fp4scope-python(7): no examples"
    out = []
    for i, b in enumerate(blocks):
        code = "\n".join(line[4:] if line.startswith("    ") else line for line in b.splitlines())
        out.append(("man-%d" % i, code.replace("\\-", "-").replace("\\(dq", '"').replace("\\e", "\\")))
    return out


def run_example(name, code):
    d = os.path.join(TMP, "doc-" + name)
    os.makedirs(d, exist_ok=True)
    p = subprocess.run([sys.executable, "-c", code], cwd=d, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, "%s: exit %d\n%s\n%s" % (name, p.returncode, p.stdout[-2000:], p.stderr[-4000:])
    return d, p.stdout


def need_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        raise Skip("no torch")


def test_readme_examples():
    need_torch()
    for name, code in readme_examples():
        d, out = run_example(name, code)
        if name == "monitor":
            tb = os.listdir(os.path.join(d, "runs", "fp4"))
            assert any(f.startswith("events.out.tfevents.") for f in tb), tb
            assert os.path.exists(os.path.join(d, "run.h5")) and os.path.exists(os.path.join(d, "run.stats.h5"))
        if name == "qat":
            assert 0 < float(out.split()[-1]) < 1, out


def test_man_examples():
    for name, code in man_examples():
        run_example(name, code)


if __name__ == "__main__":
    run(globals())
