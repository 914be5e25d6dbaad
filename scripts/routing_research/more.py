"""More held-out tries: univariate features with the sign learned on the
training half; within-family-centred training (family identity used only
to centre the training data, never at scoring); leave-one-family-out."""
import numpy as np
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.preprocessing import StandardScaler
from harness import D, N, metrics, fmt, evaluate, KINDS
import experiments as ex
from features import NAMES
kinds = np.array(D["kind"]); G = ex.GAIN.astype(float)

print("univariate (sign from training half), held-out APGR, top 8:")
res = []
for c, name in enumerate(NAMES):
    x = ex.F[:, c]
    def fp(tr, te, x=x):
        r = np.corrcoef(x[tr], G[tr])[0, 1]
        return x[te] * (1 if (np.nan_to_num(r) >= 0) else -1)
    r = evaluate(fp); res.append((r["mean"][0], name, r["folds"][0][0], r["folds"][1][0]))
for a, n, f1, f2 in sorted(res, reverse=True)[:8]: print(f"  {n:15s} {a:.2f} ({f1:.2f}/{f2:.2f})")
print("  worst:", [(n, round(a, 2)) for a, n, _, _ in sorted(res)[:3]])

def centred(X, alpha=10.0):
    def fp(tr, te):
        tr = np.array(tr); sc = StandardScaler().fit(X[tr]); Z = sc.transform(X[tr]); y = G[tr].copy()
        for k in set(kinds[tr]):
            m = kinds[tr] == k; Z[m] -= Z[m].mean(0); y[m] -= y[m].mean()
        return sc.transform(X[te]) @ Ridge(alpha=alpha).fit(Z, y).coef_
    return fp
for nm, X in (("features", ex.F), ("MiniLM", ex.E), ("MiniLM+features", ex.EF)):
    for alpha in (1.0, 10.0, 100.0):
        r = evaluate(centred(X, alpha))
        print(f"{nm}, within-family-centred ridge a={alpha}: {fmt(r['mean'])} folds {[round(f[0], 2) for f in r['folds']]}")

# leave-one-family-out (NOT the benchmark's protocol: 11 training families)
from harness import rm, ACC_W, ACC_S, WEAK, STRONG
for nm, fp in (("features, pairwise ranker", ex.APPROACHES["features, pairwise ranker"]),
               ("features, logistic gain C=1", ex.APPROACHES["features, logistic gain C=1"]),
               ("MiniLM, logistic gain C=1", ex.APPROACHES["MiniLM, logistic gain C=1"]),
               ("MiniLM, kNN k=15", ex.APPROACHES["MiniLM, kNN k=15"])):
    sc = np.zeros(N)
    for k in KINDS:
        te = np.where(kinds == k)[0]; tr = np.where(kinds != k)[0]; sc[te] = fp(tr, te)
    print(f"leave-one-family-out, {nm}: {fmt(metrics(sc))}")
