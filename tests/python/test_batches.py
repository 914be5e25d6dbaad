"""The Files and Batches API, driven by the openai SDK's own files and
batches calls against the real binary over a simulator: a batch's answers
and line-level errors, a batch of Responses requests, bad uploads and requests, cancelling, a batch that
resumes after the gateway is killed (every line answered once), each key's
own files and batches, and every line in the ledger under the batch
profile."""

import json
import os
import sqlite3
import subprocess
import tempfile
import time

import openai
import pytest

from conftest import BINARY, Proc, start_sim

KEY, OTHER = "sk-batch-owner", "sk-batch-other"


def key_hash(key):
    return subprocess.run([str(BINARY), "key-hash", key], capture_output=True, text=True, check=True).stdout.strip()


def config(sim, folder, **batches):
    settings = ", ".join(f"{k}: {v}" for k, v in batches.items())
    return f"""
backends:
  local:
    tier: small
    openai: {{base_url: "{sim.url}/v1"}}
    max_concurrency: 2
    max_queue: 64
ledger: {{path: "{folder}/ledger.db"}}
batches: {{{settings}}}
auth:
  keys:
    - {{name: owner, hash: "{key_hash(KEY)}"}}
    - {{name: other, hash: "{key_hash(OTHER)}"}}
"""


def start(text, folder):
    path = os.path.join(folder, "config.yaml")
    with open(path, "w") as f:
        f.write(text)
    return Proc(["serve", "--config", path, "--listen", "127.0.0.1:0"])


@pytest.fixture(scope="module")
def sim():
    proc = start_sim("base_ttft_ms=20")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def gateway(sim):
    folder = tempfile.mkdtemp(prefix="switchyard-batches-")
    proc = start(config(sim, folder, max_file_bytes=20000, lines_in_flight=2), folder)
    proc.folder = folder
    yield proc
    proc.stop()


def client(gateway, key=KEY):
    return openai.OpenAI(base_url=gateway.url + "/v1", api_key=key, max_retries=0)


def line(custom_id, content="hello", model="local", url="/v1/chat/completions"):
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": url,
                       "body": {"model": model, "max_tokens": 8,
                                "messages": [{"role": "user", "content": content}]}})


def upload(sdk, lines):
    path = os.path.join(tempfile.mkdtemp(), "input.jsonl")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(path, "rb") as f:
        return sdk.files.create(file=f, purpose="batch")


def wait(sdk, batch_id, until=("completed", "failed", "cancelled", "expired"), seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        batch = sdk.batches.retrieve(batch_id)
        if batch.status in until:
            return batch
        time.sleep(0.2)
    raise AssertionError(f"batch {batch_id} still {batch.status}")


def jsonl(sdk, file_id):
    return [json.loads(l) for l in sdk.files.content(file_id).text.splitlines() if l]


def test_a_batch_answers_each_line_and_bad_lines_fail_alone(gateway):
    sdk = client(gateway)
    lines = [line(f"r{i}", f"line {i}") for i in range(6)]
    lines += ["not json", line("wrong-model", model="nope"), line("r0"),
              line("wrong-url", url="/v1/embeddings")]
    file = upload(sdk, lines)
    assert (file.purpose, file.status, file.bytes) == ("batch", "processed", len("\n".join(lines)) + 1)
    batch = sdk.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions",
                               completion_window="24h", metadata={"job": "nightly"})
    assert batch.status == "in_progress" and batch.request_counts.total == 10
    assert batch.metadata == {"job": "nightly"}
    batch = wait(sdk, batch.id)
    assert batch.status == "completed", batch
    assert (batch.request_counts.completed, batch.request_counts.failed) == (6, 4)
    output = jsonl(sdk, batch.output_file_id)
    assert [o["custom_id"] for o in output] == [f"r{i}" for i in range(6)]
    for answer in output:
        assert answer["response"]["status_code"] == 200
        assert answer["response"]["body"]["choices"][0]["message"]["content"]
    errors = {e["custom_id"]: e for e in jsonl(sdk, batch.error_file_id)}
    assert errors[None]["error"]["code"] == "invalid_request" and errors[None]["error"]["line"] == 7
    assert errors["wrong-model"]["response"]["status_code"] == 404
    assert errors["r0"]["error"]["code"] == "duplicate_custom_id"
    assert "endpoint" in errors["wrong-url"]["error"]["message"]
    with pytest.raises(openai.ConflictError):
        sdk.batches.cancel(batch.id)  # it has completed
    # Listed, newest first, and each line in the ledger under the batch
    # profile, with its batch's id.
    assert sdk.batches.list().data[0].id == batch.id
    ids = {f.id for f in sdk.files.list().data}
    assert {file.id, batch.output_file_id, batch.error_file_id} <= ids
    profiles = []
    for _ in range(50):  # the ledger commits in groups
        with sqlite3.connect(os.path.join(gateway.folder, "ledger.db")) as ledger:
            profiles = ledger.execute("SELECT profile, key, COUNT(*) FROM requests WHERE batch = ? "
                                      "AND status = 'ok' GROUP BY profile, key", (batch.id,)).fetchall()
        if sum(n for *_, n in profiles) >= 6:
            break
        time.sleep(0.1)
    assert profiles == [("batch", "owner", 6)], profiles
    # `switchyard batches` shows it done; `switchyard budgets` its throughput.
    config_file = os.path.join(gateway.folder, "config.yaml")
    listed = subprocess.run([str(BINARY), "batches", "--config", config_file],
                            capture_output=True, text=True, check=True).stdout
    row = next(l for l in listed.splitlines() if l.startswith(batch.id)).split()
    assert row[1:6] == ["owner", "completed", "[####################]", "100%", "10/10"], row
    report = json.loads(subprocess.run([str(BINARY), "budgets", "--config", config_file, "--since", "1h",
                                        "--format", "json"], capture_output=True, text=True, check=True).stdout)
    load = report["batches"]
    assert load["batch_calls"] == 6 and load["batch_output_tokens"] > 0 and load["batch_tokens_per_hour"] > 0


def test_bad_uploads_and_requests_are_refused(gateway):
    sdk = client(gateway)
    with pytest.raises(openai.APIStatusError) as caught:
        upload(sdk, [line(f"r{i}", "x" * 500) for i in range(60)])
    assert caught.value.status_code == 413
    with pytest.raises(openai.BadRequestError):
        sdk.files.create(file=("x.jsonl", b"{}\n"), purpose="fine-tune")
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.batches.create(input_file_id="file-none", endpoint="/v1/chat/completions", completion_window="24h")
    assert "input_file_id" in str(caught.value)
    file = upload(sdk, [line("a")])
    with pytest.raises(openai.BadRequestError):
        sdk.batches.create(input_file_id=file.id, endpoint="/v1/images", completion_window="24h")
    with pytest.raises(openai.BadRequestError):
        sdk.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="1h")
    empty = sdk.files.create(file=("empty.jsonl", b"\n"), purpose="batch")
    failed = sdk.batches.create(input_file_id=empty.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert failed.status == "failed" and failed.errors.data[0].code == "empty_file"
    # Deleted, a file is gone, in OpenAI's words.
    assert sdk.files.delete(file.id).deleted
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.files.retrieve(file.id)
    assert caught.value.body["message"] == f"No such File object: {file.id}"
    assert caught.value.body["param"] == "id"
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.batches.retrieve("batch_none")
    assert caught.value.body["message"] == "No such Batch object: batch_none"
    # A files page goes up to OpenAI's 10,000; batches' to 100.
    assert len(sdk.files.list(limit=10000).data) >= 1
    with pytest.raises(openai.BadRequestError):
        sdk.files.list(limit=10001)
    with pytest.raises(openai.BadRequestError):
        sdk.batches.list(limit=101)


def test_a_responses_batch_answers_in_the_responses_shape(gateway):
    sdk = client(gateway)
    lines = [json.dumps({"custom_id": f"q{i}", "method": "POST", "url": "/v1/responses",
                         "body": {"model": "local", "input": f"question {i}", "max_output_tokens": 16}})
             for i in range(3)]
    file = upload(sdk, lines)
    batch = sdk.batches.create(input_file_id=file.id, endpoint="/v1/responses", completion_window="24h")
    batch = wait(sdk, batch.id)
    assert (batch.status, batch.request_counts.completed, batch.request_counts.failed) == ("completed", 3, 0)
    output = jsonl(sdk, batch.output_file_id)
    assert [o["custom_id"] for o in output] == ["q0", "q1", "q2"]
    for answer in output:
        body = answer["response"]["body"]
        # The simulator writes until max_output_tokens: `incomplete`.
        assert body["object"] == "response" and body["status"] in ("completed", "incomplete"), body
        assert body["output"][0]["content"][0]["text"]


def test_each_key_sees_only_its_own(gateway):
    file = upload(client(gateway), [line("a")])
    batch = client(gateway).batches.create(input_file_id=file.id, endpoint="/v1/chat/completions",
                                           completion_window="24h")
    other = client(gateway, OTHER)
    for call in (lambda: other.files.retrieve(file.id), lambda: other.files.content(file.id),
                 lambda: other.batches.retrieve(batch.id), lambda: other.batches.cancel(batch.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    assert file.id not in {f.id for f in other.files.list().data}
    with pytest.raises(openai.BadRequestError):
        other.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")


def slow_gateway(folder, **batches):
    sim = start_sim("base_ttft_ms=250")
    return sim, start(config(sim, folder, **batches), folder)


def running_batch(sdk, lines, answered):
    """A batch of `lines` lines, once `answered` of them are."""
    file = upload(sdk, [line(f"r{i}") for i in range(lines)])
    batch = sdk.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
    wait_for = time.monotonic() + 30
    while sdk.batches.retrieve(batch.id).request_counts.completed < answered and time.monotonic() < wait_for:
        time.sleep(0.05)
    return batch


def test_a_cancelled_batch_stops_starting_lines():
    folder = tempfile.mkdtemp(prefix="switchyard-batches-")
    sim, gateway = slow_gateway(folder, lines_in_flight=1)
    try:
        sdk = client(gateway)
        batch = running_batch(sdk, 20, 2)
        assert sdk.batches.cancel(batch.id).status in ("cancelling", "cancelled")
        batch = wait(sdk, batch.id)
        assert batch.status == "cancelled" and batch.cancelled_at
        done = batch.request_counts.completed
        assert 2 <= done < 20
        assert len(jsonl(sdk, batch.output_file_id)) == done
        # The lines never run fail as cancelled, each in the error file.
        assert batch.request_counts.failed == 20 - done
        assert {e["error"]["code"] for e in jsonl(sdk, batch.error_file_id)} == {"batch_cancelled"}
        assert sdk.batches.cancel(batch.id).status == "cancelled", "cancelling again changes nothing"
    finally:
        gateway.stop()
        sim.stop()


def test_a_batch_resumes_after_a_restart_with_every_line_answered_once():
    folder = tempfile.mkdtemp(prefix="switchyard-batches-")
    sim, gateway = slow_gateway(folder, lines_in_flight=1)
    try:
        sdk = client(gateway)
        batch = running_batch(sdk, 12, 3)
        gateway.proc.kill()  # no goodbye: as a crash
        gateway.proc.wait()
        with sqlite3.connect(os.path.join(folder, "switchyard-batches.db")) as store:
            (before,) = store.execute("SELECT completed FROM batches WHERE id = ?", (batch.id,)).fetchone()
        assert 3 <= before < 12, f"killed mid-batch: {before} of 12 lines answered"
        gateway = Proc(["serve", "--config", os.path.join(folder, "config.yaml"), "--listen", "127.0.0.1:0"])
        sdk = client(gateway)
        batch = wait(sdk, batch.id)
        assert batch.status == "completed"
        assert (batch.request_counts.completed, batch.request_counts.failed) == (12, 0)
        output = jsonl(sdk, batch.output_file_id)
        assert sorted(o["custom_id"] for o in output) == sorted(f"r{i}" for i in range(12))
        # Lines answered before the kill were not run again: the ledger has
        # a row for each line answered after the restart, and no more rows
        # than the 12 answers and the one line (lines_in_flight) running
        # when it died. (Rows still waiting for their group commit at the
        # kill are lost with the process.)
        rows = 0
        for _ in range(50):
            with sqlite3.connect(os.path.join(folder, "ledger.db")) as ledger:
                (rows,) = ledger.execute("SELECT COUNT(*) FROM requests WHERE batch = ? AND status = 'ok'",
                                         (batch.id,)).fetchone()
            if rows >= 12 - before:
                break
            time.sleep(0.1)
        assert 12 - before <= rows <= 13, (rows, before)
    finally:
        gateway.stop()
        sim.stop()
