"""Transductive variant: cluster the scored half's prompts (KMeans on MiniLM,
no labels, no family names), rank within a cluster by a within-family model
trained on family-centred training data, and between clusters by a
between-family model (ridge on family means) or not at all."""
import numpy as np
from sklearn.cluster import KMeans
from sklearn.linear_model import Ridge
from sklearn.preprocessing import StandardScaler
from sklearn.metrics import adjusted_rand_score
from harness import D, N, fmt, evaluate
import experiments as ex
kinds = np.array(D["kind"]); G = ex.GAIN.astype(float)

def make(X, k, alpha=10.0, beta=0.0, emb=ex.E):
    aris = []
    def fp(tr, te):
        tr, te = np.array(tr), np.array(te)
        sc = StandardScaler().fit(X[tr]); Z = sc.transform(X[tr]); y = G[tr].copy()
        fams = sorted(set(kinds[tr])); Zm = np.array([Z[kinds[tr] == f].mean(0) for f in fams]); ym = np.array([y[kinds[tr] == f].mean() for f in fams])
        for f in fams:
            m = kinds[tr] == f; Z[m] -= Z[m].mean(0); y[m] -= y[m].mean()
        within = Ridge(alpha=alpha).fit(Z, y)
        between = Ridge(alpha=alpha * 10).fit(Zm, ym)
        lab = KMeans(k, n_init=10, random_state=0).fit_predict(emb[te])
        aris.append(adjusted_rand_score(kinds[te], lab))
        Zt = sc.transform(X[te]); out = np.zeros(len(te))
        for c in set(lab):
            m = lab == c; mu = Zt[m].mean(0)
            out[m] = (Zt[m] - mu) @ within.coef_ + beta * between.predict(mu[None])[0] * 10
        return out
    return fp, aris

if __name__ == "__main__":
  for nm, X in (("features", ex.F), ("MiniLM", ex.E), ("MiniLM+features", ex.EF)):
      for k in (4, 6, 8, 12):
          for beta in (0.0, 1.0):
              fp, aris = make(X, k, beta=beta)
              r = evaluate(fp)
              print(f"{nm}, k={k}, between={'ridge' if beta else 'none'}: {fmt(r['mean'])} folds {[round(f[0], 2) for f in r['folds']]} ARI {np.mean(aris):.2f}", flush=True)

