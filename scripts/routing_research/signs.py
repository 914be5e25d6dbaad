"""Within-family direction of cues: Spearman(cue, gain) per family."""
import numpy as np, time
from scipy.stats import spearmanr
from harness import D, N, KINDS, complexity
import experiments as ex
from features import NAMES, features
kinds = np.array(D["kind"]); G = ex.GAIN.astype(float); lev = np.array(D["level"], float)
cues = {"level": lev, "prompt chars": ex.F[:, NAMES.index("n_chars")], "max digits": ex.F[:, NAMES.index("max_digits")],
        "n_numbers": ex.F[:, NAMES.index("n_numbers")]}
for cn, x in cues.items():
    rs = {}
    for k in KINDS:
        m = kinds == k
        if np.std(x[m]) > 0 and np.std(G[m]) > 0: rs[k] = spearmanr(x[m], G[m])[0]
    pos = sum(r > 0.1 for r in rs.values()); neg = sum(r < -0.1 for r in rs.values())
    print(f"{cn:13s} within-family rho: +{pos} / -{neg} of {len(rs)} families; " + ", ".join(f"{k}:{r:+.2f}" for k, r in sorted(rs.items())))
# decision cost of the features + a linear score, in this Python (Rust would be faster)
w = np.random.randn(len(NAMES)); ts = []
for p, mt in zip(D["prompt"] * 3, D["max_tokens"] * 3):
    t = time.perf_counter(); c = complexity(p, mt); s = float(np.dot(features(p, c), w)); ts.append((time.perf_counter() - t) * 1e3)
ts.sort(); print(f"features+complexity+linear score in CPython: p50 {ts[len(ts)//2]:.3f} ms, p99 {ts[int(len(ts)*0.99)]:.3f} ms")
