"""A small synthetic capture for the logits path of fp4-remedy (made on the
CPU, through the PyTorch adapter's C writer without PyTorch): per step, the
final hidden states of a BF16 trainer and of a rollout engine whose hidden
states drift from them (and carry a few hot channels), an LM head, sampled
tokens, and the two sides' per-token log-probs as a run would log them (the
rollout's through NVFP4 fake quantization of its LM-head input).

usage: make_logits_capture.py OUT.h5 [SEED]   (numpy; FP4SCOPE_LIB or a
build/ beside the source tree for libfp4scope.so)"""
import os
import sys

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tools", "python"))
import fp4scope  # noqa: E402


def bf16(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def log_softmax(y):
    y = y.astype(np.float64)
    m = y.max(axis=1, keepdims=True)
    return y - m - np.log(np.exp(y - m).sum(axis=1, keepdims=True))


def main():
    out = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    rng = np.random.default_rng(seed)
    steps, seqs, seq_len, d, V = 3, 4, 24, 128, 256
    T = seqs * seq_len
    chan = np.exp(rng.normal(0, 0.5, d))
    chan[rng.choice(d, 3, replace=False)] *= 12          # hot channels of the final norm
    w = bf16(rng.normal(0, 2.0 / np.sqrt(d), (V, d)))
    if os.path.exists(out):
        os.remove(out)
    cap = fp4scope.Capture(out, producer="tests/remedy/make_logits_capture.py")
    cap.attr("synthetic", 1)
    cap.attr("lm_head_site", "lm_head")
    for step in range(steps):
        with cap.step(step):
            ht = bf16(rng.standard_normal((T, d)) * chan)
            hr = bf16(ht * (1 + 0.01 * rng.standard_normal((T, d))))   # the rollout engine's drift
            lt = log_softmax(ht.astype(np.float64) @ w.T.astype(np.float64))
            p = np.exp(lt)
            token = np.array([rng.choice(V, p=p[i] / p[i].sum()) for i in range(T)], dtype=np.int64)
            q = fp4scope.fake_quant(hr, "nvfp4", "te")
            lr = log_softmax(q.astype(np.float64) @ w.T.astype(np.float64))
            cap.put(step, "lm_head", "trainer", ht)
            cap.put(step, "lm_head", "rollout", hr)
            cap.put(step, "lm_head", "weight", w)
            seq = np.repeat(np.arange(seqs), seq_len)
            pos = np.tile(np.arange(seq_len), seqs)
            rows = np.arange(T)
            cap.put_logprobs(step, lt[rows, token].astype(np.float32), lr[rows, token].astype(np.float32), seq, pos)
            cap.put_tokens(step, token)
    cap.close()


if __name__ == "__main__":
    main()
