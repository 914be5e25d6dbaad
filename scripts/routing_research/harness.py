"""Held-out routing-quality harness (issue #45), built on the project's own
metric functions (scripts/routing_metrics.py) and grader (routing_tasks).
Reproduces routing_quality_report.py's sweep: per fold seed, every task is
scored by a model trained on the *other* half of the families; all the
pooled scores are swept (10 bins); figures are the mean over fold seeds 1, 2.
"""
from __future__ import annotations
import json, math, os, pickle, re, statistics, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import routing_metrics as rm  # noqa
import routing_quality_report as rq  # noqa
import routing_replay_inputs as ri  # noqa
import routing_collect as rc  # noqa

# Inputs and outputs live in a work folder (scripts/routing-research.sh
# fills it): answers.jsonl, embeddings, results.
WORK = os.environ.get("RQ_WORK", ".")
CACHE = os.path.join(WORK, "data.pkl")


def load_data():
    if os.path.exists(CACHE):
        return pickle.load(open(CACHE, "rb"))
    rows = rq.load([os.path.join(WORK, "answers.jsonl")])  # re-graded
    ids = sorted(set(rows["small"]) & set(rows["mid"]) & set(rows["large"]))
    d = {
        "ids": ids,
        "prompt": [rows["small"][i]["task"]["prompt"] for i in ids],
        "kind": [rows["small"][i]["task"]["kind"] for i in ids],
        "level": [rows["small"][i]["task"]["level"] for i in ids],
        "small": [bool(rows["small"][i]["correct"]) for i in ids],
        "mid": [bool(rows["mid"][i]["correct"]) for i in ids],
        "large": [bool(rows["large"][i]["correct"]) for i in ids],
        "small_logprob": [rows["small"][i].get("mean_logprob") for i in ids],
        "small_finish": [rows["small"][i].get("finish_reason") for i in ids],
        "small_reply": [rows["small"][i].get("reply", "") for i in ids],
        "max_tokens": [rc.MAX_TOKENS[rows["small"][i]["task"]["kind"]] for i in ids],
    }
    pickle.dump(d, open(CACHE, "wb"))
    return d


D = load_data()
N = len(D["ids"])
WEAK, STRONG = D["small"], D["large"]
ACC_W, ACC_S = sum(WEAK) / N, sum(STRONG) / N
KINDS = sorted(set(D["kind"]))


def halves(fold_seed):
    """family -> 'a'/'b', exactly as routing_replay_inputs.halves."""
    return ri.halves(KINDS, fold_seed)


def folds(fold_seeds=(1, 2)):
    """Yields (fold_seed, train_idx, test_idx) for both directions."""
    for fs in fold_seeds:
        h = halves(fs)
        a = [j for j in range(N) if h[D["kind"][j]] == "a"]
        b = [j for j in range(N) if h[D["kind"][j]] == "b"]
        yield fs, a, b
        yield fs, b, a


def metrics(scores):
    curve = rm.sweep(list(map(float, scores)), WEAK, STRONG)
    return (rm.apgr(curve, ACC_W, ACC_S), rm.cpt(curve, 0.5, ACC_W, ACC_S), rm.cpt(curve, 0.8, ACC_W, ACC_S))


def mean_none(v):
    v = [x for x in v if x is not None]
    return statistics.mean(v) if v else None


def evaluate_fixed(scores):
    m = metrics(scores)
    return {"mean": m, "folds": [m, m]}


def evaluate(fit_predict, fold_seeds=(1, 2)):
    """fit_predict(train_idx, test_idx) -> scores for test_idx (higher = send
    to large). Scores of both directions are pooled per fold seed, as the
    report pools replay-a and replay-b."""
    per = []
    for fs in fold_seeds:
        h = halves(fs)
        a = [j for j in range(N) if h[D["kind"][j]] == "a"]
        b = [j for j in range(N) if h[D["kind"][j]] == "b"]
        s = [0.0] * N
        for tr, te in ((a, b), (b, a)):
            for j, v in zip(te, fit_predict(tr, te)):
                s[j] = float(v)
        per.append(metrics(s))
    mean = tuple(mean_none([p[k] for p in per]) for k in range(3))
    return {"mean": mean, "folds": per}


def oracle():
    curve = [(x / 10, rm.oracle_accuracy(x / 10, WEAK, STRONG)) for x in range(11)]
    return rm.apgr(curve, ACC_W, ACC_S), rm.cpt(curve, 0.5, ACC_W, ACC_S), rm.cpt(curve, 0.8, ACC_W, ACC_S)


def random_router():
    ms = [metrics(rm.random_scores(N, s)) for s in range(rq.RANDOM_SEEDS)]
    return tuple(mean_none([m[k] for m in ms]) for k in range(3))


# ---- the complexity score (router/src/features.rs + signals.rs), in Python
CODE = ["```", "def ", "fn ", "class ", "function", "import ", "#include", "console.log", "return ", "=>",
        "public static", "select ", "traceback", "stack trace", "compile", "refactor", "bug", "python", "rust",
        "javascript", "typescript", "regex", "sql", "unit test", "segfault", "exception"]
MATH = ["integral", "derivative", "equation", "theorem", "prove", "\\frac", "matrix", "probability", "solve for",
        "sqrt", "lemma", "eigen", "polynomial", "∑", "≤", "≥"]
REASONING = ["step by step", "analyze", "analyse", "compare", "explain why", "trade-off", "tradeoff", "design",
             "evaluate", "pros and cons", "architecture", "strategy", "critique", "in depth", "reason about", "plan "]
_PATS = [(p.lower(), k) for k, ws in enumerate((CODE, MATH, REASONING)) for p in ws]


def signals(text):
    t = text.lower()
    hits = [0, 0, 0]
    pos = 0
    while pos < len(t):  # non-overlapping, earliest-ending match (aho-corasick Standard)
        best = None
        for p, k in _PATS:
            i = t.find(p, pos)
            if i >= 0:
                end = i + len(p)
                if best is None or end < best[0]:
                    best = (end, k)
        if best is None:
            break
        hits[best[1]] += 1
        pos = best[0]
    return [1 - math.exp(-h / 2) for h in hits]


def estimate_tokens(text):
    def cls(b):
        if 97 <= b <= 122 or 65 <= b <= 90: return 0
        if 48 <= b <= 57: return 1
        if b in (10, 13): return 3
        if b in (32, 9): return 2
        if 0x80 <= b <= 0xBF: return 6
        if b >= 0xC0: return 5
        return 4

    def run_tokens(c, prev, run):
        if c == 0: return 1 + max(run - 4, 0) // 6
        if c == 1: return -(-run // 3)
        if c == 2: return int(run > 1 and prev != 3)
        if c == 3: return int(prev != 4)
        if c == 4: return -(-run // 3)
        if c == 5: return run
        return 0
    tokens, cur, prev, run = 0, 7, 7, 0
    for b in text.encode():
        c = cls(b)
        if c == cur:
            run += 1
        elif c != 6:
            tokens += run_tokens(cur, prev, run)
            prev, cur, run = cur, c, 1
    return tokens + run_tokens(cur, prev, run)


def complexity(prompt, max_tokens):
    pt = 3 + 3 + estimate_tokens(prompt)
    length = min(math.log1p(pt) / math.log1p(32768), 1.0)
    code, mth, reas = signals(prompt)
    depth = 1 / 20
    output = min(max_tokens / 4096, 1.0)
    return 0.25 * length + 0.15 * code + 0.15 * mth + 0.2 * reas + 0.1 * depth + 0.05 * output


def fmt(m):
    a, c5, c8 = m
    f = lambda x: "n/a" if x is None else f"{x * 100:.0f}"
    return f"{a:.2f} | {f(c5)} | {f(c8)}"


if __name__ == "__main__":
    print(f"tasks {N}; small {ACC_W:.3f} large {ACC_S:.3f}")
    for fs in (1, 2):
        h = halves(fs)
        print(f"fold {fs}: a={sorted(k for k in h if h[k]=='a')} b={sorted(k for k in h if h[k]=='b')}")
    print("oracle", fmt(oracle()))
    print("random", fmt(random_router()))
    print("prompt length", fmt(metrics([len(p) for p in D["prompt"]])))
    print("complexity", fmt(metrics([complexity(p, m) for p, m in zip(D["prompt"], D["max_tokens"])])))
    lp = []
    for l, f, r in zip(D["small_logprob"], D["small_finish"], D["small_reply"]):
        lp.append(1e9 if f == "length" or not r.strip() else (-1e9 if l is None else -l))
    print("cascade small logprob (uses small's answer)", fmt(metrics(lp)))
