"""/metrics as Prometheus itself reads it: `promtool check metrics` passes on
the exposition, a real Prometheus (Debian's package) scrapes the running
gateway, and every expression of the Grafana dashboard in charts/ is valid
PromQL naming only metrics the gateway exposes.

Needs `prometheus` and `promtool` on PATH (scripts/test.sh installs them)."""

import hashlib
import json
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import openai
import pytest

from conftest import KEY, ROOT, start_gateway

DASHBOARD = ROOT / "charts" / "switchyard" / "dashboards" / "switchyard.json"
FAST_SIM = "base_ttft_ms: 2, prefill_tokens_per_s: 1000000, decode_tokens_per_s: 5000, jitter: 0"


@pytest.fixture(scope="module")
def gateway():
    for tool in ("prometheus", "promtool"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (scripts/test.sh installs Debian's prometheus package)")
    # Every kind of series present: keys with a budget, a route that
    # caches answers, a drafting backend, and traces on (sent to a port
    # where nothing listens: the failed exports are counted).
    digest = hashlib.sha256(KEY.encode()).hexdigest()
    gateway = start_gateway(f"""
backends:
  small:
    tier: small
    sim: {{preset: small, {FAST_SIM}}}
    price: {{usd_per_hour: 0.05}}
  mid:
    tier: mid
    sim: {{preset: mid, {FAST_SIM}}}
    price: {{usd_per_hour: 0.10}}
  large:
    tier: cloud
    sim: {{preset: large, {FAST_SIM}}}
    price: {{input_per_mtok: 2.5, output_per_mtok: 10}}
routes:
  auto:
    response_cache: {{ttl_s: 60, max_entries: 100}}
    strategy:
      split:
        weights: {{small: 40, mid: 40, large: 20}}
auth:
  teams:
    research: {{budget: {{daily_usd: 5}}}}
  keys:
    - {{name: tester, hash: "sha256:{digest}", team: research}}
telemetry:
  otlp: {{endpoint: "http://127.0.0.1:{free_port()}", timeout_ms: 200}}
""")
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=KEY, max_retries=0)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
    # The same deterministic question three times: a backend answers the
    # first, the response cache the other two.
    for _ in range(3):
        client.chat.completions.create(
            model="auto", messages=[{"role": "user", "content": "cached?"}], max_tokens=8, temperature=0
        )
    for i in range(20):
        client.chat.completions.create(
            model="auto", messages=[{"role": "user", "content": f"hello {i}"}], max_tokens=8, stream=False
        )
        for _ in client.chat.completions.create(
            model="auto", messages=[{"role": "user", "content": f"stream {i}"}], max_tokens=8, stream=True
        ):
            pass
    try:
        yield gateway
    finally:
        gateway.stop()
        shutil.rmtree(gateway.config_folder, ignore_errors=True)


def fetch(url, accept=None):
    request = urllib.request.Request(url, headers={"accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=10) as r:
        return r.headers.get("content-type"), r.read().decode()


def test_promtool_accepts_the_exposition(gateway):
    content_type, text = fetch(gateway.url + "/metrics")
    assert content_type.startswith("text/plain; version=0.0.4"), content_type
    checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # Scrapers that ask get OpenMetrics, which ends with its EOF marker.
    content_type, text = fetch(gateway.url + "/metrics", "application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text"), content_type
    assert text.endswith("# EOF\n")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def prometheus(gateway):
    """A real Prometheus scraping the gateway every second."""
    folder = tempfile.mkdtemp(prefix="switchyard-prometheus-")
    target = urllib.parse.urlparse(gateway.url).netloc
    with open(f"{folder}/prometheus.yml", "w") as f:
        f.write(f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: switchyard
    static_configs: [{{targets: ["{target}"]}}]
""")
    port = free_port()
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={folder}/prometheus.yml", f"--storage.tsdb.path={folder}/data",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                if query(url, 'up{job="switchyard"}') and query(url, "switchyard_requests_total"):
                    break
            except OSError:
                pass
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def query(url, expr):
    """The result of an instant query; fails on an invalid expression."""
    _, body = fetch(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    answer = json.loads(body)
    assert answer["status"] == "success", (expr, answer)
    return answer["data"]["result"]


def test_a_real_prometheus_scrapes_the_gateway(prometheus):
    _, body = fetch(prometheus + "/api/v1/targets")
    (target,) = json.loads(body)["data"]["activeTargets"]
    assert target["health"] == "up", target
    assert target["lastError"] == "", target
    [up] = query(prometheus, 'up{job="switchyard"}')
    assert up["value"][1] == "1"
    # Backend calls: 40, and the first of the three cacheable ones; the
    # cache answered the other two.
    ok = query(prometheus, 'sum(switchyard_requests_total{outcome="ok"})')
    assert float(ok[0]["value"][1]) == 41
    cache = query(prometheus, "sum by (result) (switchyard_response_cache_lookups_total)")
    assert {c["metric"]["result"]: float(c["value"][1]) for c in cache} == {"hit": 2, "miss": 1}
    # The GenAI histograms with their specified buckets.
    buckets = query(prometheus, 'gen_ai_client_operation_duration_seconds_bucket{switchyard_backend="small"}')
    assert {b["metric"]["le"] for b in buckets} >= {"0.01", "0.02", "81.92", "+Inf"}


def dashboard_expressions():
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            yield panel["title"], target["expr"]


def test_every_dashboard_query_is_valid_and_names_only_exposed_metrics(gateway, prometheus):
    _, text = fetch(gateway.url + "/metrics")
    # Each exposed metric's label names.
    exposed = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, rest = line.partition("{")
            labels = set(re.findall(r'(\w+)="', rest.rsplit("}", 1)[0])) if rest else set()
            exposed.setdefault(name.split(" ")[0], set()).update(labels)
    # Grafana fills these in before a query reaches Prometheus.
    substitutions = {"$__rate_interval": "1m", "$__range": "1h", "$route": ".*", "$backend": ".*"}
    expressions = list(dashboard_expressions())
    assert len(expressions) >= 20
    for title, expr in expressions:
        # Metric names, once label matchers and grouping clauses are gone.
        bare = re.sub(r"\{[^}]*\}|\b(?:by|without|ignoring|on|group_left|group_right)\s*\([^)]*\)", "", expr)
        names = set(re.findall(r"\b(?:switchyard|gen_ai)_[a-z_]+", bare))
        assert names, (title, expr)
        missing = names - exposed.keys()
        assert not missing, f"{title}: {sorted(missing)} not on /metrics"
        # Every label a selector matches on is one the metric has.
        for name, matchers in re.findall(r"\b((?:switchyard|gen_ai)_[a-z_]+)\{([^}]*)\}", expr):
            labels = set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", matchers))
            assert labels <= exposed[name], f"{title}: {name} has no label {sorted(labels - exposed[name])}"
        for variable, value in substitutions.items():
            expr = expr.replace(variable, value)
        query(prometheus, expr)
