"""The openai SDK over HTTPS to the gateway (server.tls), with a certificate
made here by openssl and trusted through the SDK's own HTTP client."""

import os
import ssl
import subprocess
import tempfile

import openai
import pytest

from conftest import start_gateway


@pytest.fixture(scope="module")
def certificate():
    folder = tempfile.mkdtemp(prefix="switchyard-tls-")
    cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", key, "-out", cert],
        check=True, capture_output=True,
    )
    return cert, key


@pytest.fixture(scope="module")
def gateway(certificate):
    cert, key = certificate
    gw = start_gateway(f"""
server:
  tls: {{cert_file: "{cert}", key_file: "{key}"}}
backends:
  local:
    tier: small
    sim: {{preset: small, base_ttft_ms: 2, prefill_tokens_per_s: 1000000, decode_tokens_per_s: 5000, jitter: 0}}
""")
    yield gw
    gw.stop()


def test_the_openai_sdk_over_https(gateway, certificate):
    assert gateway.url.startswith("https://")
    client = openai.OpenAI(
        base_url=gateway.url + "/v1", api_key="unused", max_retries=0, timeout=30,
        http_client=openai.DefaultHttpxClient(verify=ssl.create_default_context(cafile=certificate[0])),
    )
    reply = client.chat.completions.create(model="local", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(model="local", stream=True, messages=[{"role": "user", "content": "hi"}])
        if c.choices
    )
    assert streamed


def test_an_untrusted_certificate_is_refused(gateway):
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0, timeout=10)
    with pytest.raises(openai.APIConnectionError):
        client.models.list()
