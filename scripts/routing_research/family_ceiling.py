"""How much of the oracle's gain is family identity (measured in-sample: these
rankers are told the true rates, so they are ceilings, not routers)."""
import collections, random
from harness import *

gain = [s and not w for w, s in zip(WEAK, STRONG)]
def rate_by(keyf, lab):
    c = collections.defaultdict(list)
    for j in range(N): c[keyf(j)].append(lab[j])
    return {k: sum(v) / len(v) for k, v in c.items()}
fam = rate_by(lambda j: D["kind"][j], gain)
famlev = rate_by(lambda j: (D["kind"][j], D["level"][j]), gain)
lev = rate_by(lambda j: D["level"][j], gain)
print("family gain rate (in-sample)", fmt(metrics([fam[k] for k in D["kind"]])))
print("family x level gain rate (in-sample)", fmt(metrics([famlev[(k, l)] for k, l in zip(D["kind"], D["level"])])))
print("level alone gain rate (in-sample)", fmt(metrics([lev[l] for l in D["level"]])))
print("level as score (1..4)", fmt(metrics([l + random.Random(j).random()*1e-3 for j, l in enumerate(D["level"])])))
# within-family perfect: family rate + perfect within
print("family rate + perfect within family", fmt(metrics([fam[k] + (2 if g else 0)*0 + g*0.001 for k, g in zip(D["kind"], gain)])))
# family rate ranks: which families' held-out prediction needed
for k in sorted(fam, key=fam.get): print(f"  {k:12s} gain {fam[k]:.2f}")
# held-out: family rates learned from train families cannot be applied; the
# best any held-out model can do on family *mean* is guess by content.
