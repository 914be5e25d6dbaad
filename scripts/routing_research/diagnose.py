"""Diagnostics: (1) the same models on seen families (split by task seed, as
FOLD_SEEDS=0), to show the pipeline learns; (2) held-out scores split into a
between-family part (each family's mean score) and a within-family part
(per-family AUC of gain); (3) a cascade on small's own answer (NOT
prompt-only), trained held out."""
import numpy as np, collections, json
from sklearn.metrics import roc_auc_score
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from sklearn.pipeline import make_pipeline
from scipy.stats import spearmanr
from harness import D, N, metrics, fmt, evaluate, KINDS, halves
import experiments as ex

def seen(fp):
    s1 = [j for j in range(N) if D["ids"][j].startswith("s1-")]
    s2 = [j for j in range(N) if D["ids"][j].startswith("s2-")]
    sc = np.zeros(N); sc[s2] = fp(s1, s2); sc[s1] = fp(s2, s1); return metrics(sc)

def heldout_scores(fp, fs):
    h = halves(fs); a = [j for j in range(N) if h[D["kind"][j]] == "a"]; b = [j for j in range(N) if h[D["kind"][j]] == "b"]
    sc = np.zeros(N); sc[b] = fp(a, b); sc[a] = fp(b, a); return sc

kinds = np.array(D["kind"]); G = ex.GAIN
true_rate = {k: G[kinds == k].mean() for k in KINDS}
print("| approach | seen APGR/CPT50/CPT80 | held-out: Spearman(family mean score, family gain rate) | mean within-family AUC |")
for name in ["features, logistic gain C=1", "features, pairwise ranker", "features, GBM gain (d3, 100, 0.05)",
             "MiniLM, logistic gain C=1", "MiniLM, kNN k=15", "MiniLM+features, pairwise ranker"]:
    fp = ex.APPROACHES[name]
    rhos, aucs = [], []
    for fs in (1, 2):
        sc = heldout_scores(fp, fs)
        fm = {k: sc[kinds == k].mean() for k in KINDS}
        rhos.append(spearmanr([fm[k] for k in KINDS], [true_rate[k] for k in KINDS])[0])
        for k in KINDS:
            m = kinds == k
            if 0 < G[m].sum() < m.sum(): aucs.append(roc_auc_score(G[m], sc[m]))
    print(f"| {name} | {fmt(seen(fp))} | {np.mean(rhos):+.2f} | {np.mean(aucs):.2f} |", flush=True)

# Oracle decomposition (in-sample, told the truth): family identity alone.
fam = [true_rate[k] for k in D["kind"]]
print("family gain rate alone (in-sample ceiling):", fmt(metrics(fam)))
fl = collections.defaultdict(list)
for j in range(N): fl[(D["kind"][j], D["level"][j])].append(G[j])
print("family x level gain rate (in-sample ceiling):", fmt(metrics([np.mean(fl[(k, l)]) for k, l in zip(D["kind"], D["level"])])))
# within-family only: true family rate kept, order inside a family random -> already 'family alone' (ties broken by the sweep)
# between-family unknown: random family order, perfect within family
rng = np.random.default_rng(0); res = []
for s in range(50):
    perm = dict(zip(KINDS, rng.permutation(len(KINDS))))
    res.append(metrics([perm[k] + 0.5 * G[j] for j, k in enumerate(D["kind"])])[0])
print(f"random family order, perfect within family (mean of 50): APGR {np.mean(res):.2f}")
res = []
for s in range(50):
    perm = dict(zip(KINDS, rng.permutation(len(KINDS))))
    res.append(metrics([perm[k] / len(KINDS) + np.mean(fl[(k, l)]) for k, l in zip(D["kind"], D["level"])])[0])
print(f"level-wise truth within family, families in random order (mean of 50): APGR {np.mean(res):.2f}")
res = []
for s in range(50):
    res.append(metrics([np.mean(fl[(k, l)]) + rng.normal(0, 0.3) for k, l in zip(D["kind"], D["level"])])[0])

# Cascade on small's answer (uses small's reply: NOT a prompt-only router)
lp = np.array([-(x if x is not None else 0) for x in D["small_logprob"]])
rlen = np.array([len(r) for r in D["small_reply"]]); cut = np.array([f == "length" for f in D["small_finish"]], float)
A = np.c_[lp, np.log1p(rlen), cut, ex.F]
def casc(tr, te):
    m = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=2000)).fit(A[tr], ex.GAIN[tr]); return m.predict_proba(A[te])[:, 1]
r = evaluate(casc)
print("CASCADE (uses small's answer) -mean logprob alone:", fmt(metrics(lp)))
print("CASCADE (uses small's answer) logistic on logprob, reply length, cut-off + features, held out:", fmt(r["mean"]), [round(f[0], 2) for f in r["folds"]])
