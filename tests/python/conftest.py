"""Starts the real switchyard binary (a simulator upstream and the gateway in
front of it) on 127.0.0.1:0 for the SDK suites."""

import contextlib
import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = pathlib.Path(os.environ.get("SWITCHYARD_BIN", ROOT / "target" / "debug" / "switchyard"))
FAST = ["base_ttft_ms=2", "prefill_tokens_per_s=1000000", "decode_tokens_per_s=5000", "jitter=0"]


class Proc:
    """A switchyard process; the first stdout line names its address."""

    def __init__(self, args):
        if not BINARY.exists():
            pytest.fail(f"{BINARY} is missing: build it first (cargo build -p switchyard)")
        env = dict(os.environ, SWITCHYARD_LOG="warn")
        # Its own working directory, so its ledger file lands there.
        self.dir = tempfile.mkdtemp(prefix="switchyard-sdk-")
        self.proc = subprocess.Popen([str(BINARY), *args], stdout=subprocess.PIPE, text=True, env=env, cwd=self.dir)
        line = self.proc.stdout.readline()
        if "http://" not in line and "https://" not in line:
            self.proc.kill()
            pytest.fail(f"switchyard {args} did not start: {line!r}")
        self.url = line.strip().rsplit(" ", 1)[-1]

    def stop(self, keep_dir=False):
        """Ends the process (a gateway flushes its ledger first); its folder
        goes too unless `keep_dir`."""
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        if not keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def environment(**changes):
    """The process environment with `changes` (a value of None removes the
    variable) while the block runs, for the gateways it starts."""
    def put(values):
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    saved = {name: os.environ.get(name) for name in changes}
    try:
        put(changes)
        yield
    finally:
        put(saved)


def start_sim(*overrides):
    args = ["sim", "--listen", "127.0.0.1:0", "--profile", "small"]
    for item in [*FAST, *overrides]:
        args += ["--set", item]
    return Proc(args)


KEY = "sk-switchyard-test"


def start_gateway(config):
    """A gateway on `config` (written to a file in the gateway's own folder)."""
    folder = tempfile.mkdtemp(prefix="switchyard-config-")
    path = os.path.join(folder, "config.yaml")
    with open(path, "w") as f:
        f.write(config)
    gateway = Proc(["serve", "--config", path, "--listen", "127.0.0.1:0"])
    gateway.config_folder = folder
    return gateway


def anthropic_upstream(sim):
    """A second gateway serving /v1/messages over `sim`: the Anthropic-dialect
    backend `claude` of the gateways under test."""
    return start_gateway(f"""
backends:
  sim:
    tier: small
    openai: {{base_url: "{sim.url}/v1"}}
""")


def backends(sim, flaky, upstream):
    """Backends of the gateways under test: `local` (OpenAI dialect), `flaky`
    (resets every stream half way) and `claude` (Anthropic dialect)."""
    return f"""
backends:
  local:
    tier: small
    model: sim-local
    openai: {{base_url: "{sim.url}/v1"}}
  flaky:
    tier: small
    openai: {{base_url: "{flaky.url}/v1"}}
  claude:
    tier: small
    model: sim
    anthropic: {{base_url: "{upstream.url}/v1"}}
"""


def serve(config, *upstreams):
    """Runs a gateway on `config` until the fixture ends, then stops it and
    the `upstreams` it was given."""
    gateway = start_gateway(config)
    try:
        yield gateway
    finally:
        for proc in (gateway, *upstreams):
            proc.stop()
        shutil.rmtree(gateway.config_folder, ignore_errors=True)


@pytest.fixture(scope="session")
def keyed_gateway():
    """A gateway with auth on (one virtual key, KEY) over a simulator and a
    simulator that resets every stream half way."""
    sim = start_sim()
    flaky = start_sim("faults.reset_rate=1")
    upstream = anthropic_upstream(sim)
    digest = hashlib.sha256(KEY.encode()).hexdigest()
    config = backends(sim, flaky, upstream) + f"""
routes:
  auto:
    retries: 0
    strategy:
      split:
        weights: {{local: 1}}
auth:
  keys:
    - {{name: tester, hash: "sha256:{digest}"}}
"""
    yield from serve(config, upstream, sim, flaky)


@pytest.fixture(scope="session")
def gateway():
    """A gateway with auth off over the same three backends."""
    yield from unkeyed_gateway()


def unkeyed_gateway():
    """Runs a gateway with auth off over three backends of its own (see
    `backends`) until the caller is done with it."""
    sim = start_sim()
    flaky = start_sim("faults.reset_rate=1")
    upstream = anthropic_upstream(sim)
    config = backends(sim, flaky, upstream) + """
routes:
  auto:
    strategy:
      split:
        weights: {local: 1}
"""
    yield from serve(config, upstream, sim, flaky)


@pytest.fixture(scope="module")
def own_gateway():
    """A gateway of the test module's own over the same three backends: the
    streams the conformance suites cut open the `flaky` backend's breaker,
    which the SDK suites' shared gateway must not inherit."""
    yield from unkeyed_gateway()
