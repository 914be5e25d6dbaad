//! Every error a caller can meet: status, OpenAI error body, and for
//! overload a retry-after.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::time::Duration;

use http::Method;
use serde_json::json;
use support::{GatewayBuilder, chat, fast_sim, post_json, send};

#[tokio::test]
async fn bad_requests_get_400_naming_the_problem() {
    let upstream = fast_sim(&[]);
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &upstream.base_url(), &[])
        .start();
    let url = gateway.url("/v1/chat/completions");

    let malformed = send(
        Method::POST,
        &url,
        Some("application/json"),
        b"{\"model\": ".to_vec(),
        false,
    )
    .await;
    assert_eq!(malformed.status, 400);
    assert_eq!(malformed.error()["code"], "invalid_json");

    let missing = post_json(&url, &json!({"model": "local"})).await;
    assert_eq!(missing.status, 400);
    assert_eq!(missing.error()["param"], "messages");
    assert!(
        missing.error()["message"]
            .as_str()
            .unwrap()
            .contains("messages")
    );

    let wrong_type = post_json(&url, &json!({"model": "local", "messages": [{"role": "user", "content": "x"}], "max_tokens": "many"})).await;
    assert_eq!(wrong_type.status, 400);
    assert_eq!(wrong_type.error()["param"], "max_tokens");

    let empty = post_json(&url, &json!({"model": "local", "messages": []})).await;
    assert_eq!(empty.status, 400);
    assert_eq!(empty.error()["param"], "messages");

    let bad_format = post_json(
        &gateway.url("/v1/embeddings"),
        &json!({"model": "local", "input": "x", "encoding_format": "int8"}),
    )
    .await;
    assert_eq!(bad_format.status, 400);
    assert_eq!(bad_format.error()["param"], "encoding_format");
}

#[tokio::test]
async fn unknown_model_is_404_listing_what_exists() {
    let upstream = fast_sim(&[]);
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &upstream.base_url(), &[])
        .split("auto", &[("local", 1)])
        .start();
    let reply = post_json(&gateway.url("/v1/chat/completions"), &chat("gpt-9", "hi")).await;
    assert_eq!(reply.status, 404);
    let error = reply.error();
    assert_eq!(error["code"], "model_not_found");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("gpt-9") && message.contains("auto, local"),
        "{message}"
    );
}

#[tokio::test]
async fn oversized_and_wrongly_typed_bodies() {
    let upstream = fast_sim(&[]);
    let gateway = GatewayBuilder::new()
        .server("max_body_bytes: 1024")
        .openai("local", "small", &upstream.base_url(), &[])
        .start();
    let url = gateway.url("/v1/chat/completions");
    let big = post_json(&url, &chat("local", &"x".repeat(4096))).await;
    assert_eq!(big.status, 413);
    assert_eq!(big.error()["code"], "request_too_large");

    let form = send(
        Method::POST,
        &url,
        Some("application/x-www-form-urlencoded"),
        b"a=b".to_vec(),
        false,
    )
    .await;
    assert_eq!(form.status, 415);
    assert_eq!(form.error()["code"], "unsupported_media_type");

    let wrong_method = send(Method::GET, &url, None, Vec::new(), false).await;
    assert_eq!(wrong_method.status, 405);
    assert_eq!(wrong_method.header("allow"), Some("POST"));

    let nowhere = send(
        Method::GET,
        &gateway.url("/v2/nothing"),
        None,
        Vec::new(),
        false,
    )
    .await;
    assert_eq!(nowhere.status, 404);
    assert_eq!(nowhere.error()["code"], "unknown_url");
}

#[tokio::test]
async fn refused_and_reset_upstreams_are_502() {
    // A port that was just free: nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let resetting = fast_sim(&["faults.reset_rate=1"]);
    let gateway = GatewayBuilder::new()
        .openai("gone", "small", &format!("http://{closed}/v1"), &[])
        .openai("flaky", "small", &resetting.base_url(), &[])
        .start();
    let url = gateway.url("/v1/chat/completions");

    let refused = post_json(&url, &chat("gone", "hi")).await;
    assert_eq!(refused.status, 502);
    assert_eq!(refused.error()["code"], "upstream_unreachable");
    assert_eq!(refused.header("x-switchyard-backend"), Some("gone"));

    let reset = post_json(&url, &chat("flaky", "hi")).await;
    assert_eq!(reset.status, 502);
    assert_eq!(reset.error()["code"], "upstream_reset");
}

#[tokio::test]
async fn a_stream_cut_mid_way_ends_with_an_error_event() {
    let resetting = fast_sim(&["faults.reset_rate=1"]);
    let gateway = GatewayBuilder::new()
        .openai("flaky", "small", &resetting.base_url(), &[])
        .start();
    let mut body = chat("flaky", "hi");
    body["stream"] = json!(true);
    let reply = post_json(&gateway.url("/v1/chat/completions"), &body).await;
    assert_eq!(reply.status, 200, "headers went out before the cut");
    let events = reply.events();
    assert!(events.len() >= 2, "some chunks arrived first: {events:?}");
    let last: serde_json::Value = serde_json::from_str(events.last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "upstream_reset");
    assert!(
        !events.contains(&"[DONE]".to_owned()),
        "a cut stream must not look complete"
    );
}

/// An OpenAI-style SSE upstream for one request: a content chunk after each
/// of `gaps`, then the end of the answer (`finish`) or silence for 10 s.
async fn pausing_stream(gaps: Vec<Duration>, finish: bool) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 8192];
        // The gateway's request: its head, then a body whose last byte is `}`.
        while !request.ends_with(b"}") {
            let n = socket.read(&mut buf).await.unwrap();
            request.extend_from_slice(&buf[..n]);
        }
        let chunk = |delta: &str, finish: &str| {
            format!(
                "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
            )
        };
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        for gap in gaps {
            tokio::time::sleep(gap).await;
            let event = chunk(r#"{"content":"x"}"#, "null");
            if socket.write_all(event.as_bytes()).await.is_err() {
                return;
            }
        }
        if finish {
            let end = chunk("{}", r#""stop""#) + "data: [DONE]\n\n";
            let _ = socket.write_all(end.as_bytes()).await;
        } else {
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
    });
    addr
}

/// The events of a streamed chat through a gateway whose one backend is
/// `upstream`, with the given idle timeout.
async fn stream_events(upstream: std::net::SocketAddr, idle_ms: u64) -> Vec<String> {
    let gateway = GatewayBuilder::new()
        .openai(
            "paused",
            "small",
            &format!("http://{upstream}/v1"),
            // A window of its own: the one-shot server answers one call,
            // not the gateway asking its `/v1/models` for one.
            &[
                &format!("timeouts: {{idle_ms: {idle_ms}}}"),
                "context_window: 100000",
            ],
        )
        .start();
    let mut body = chat("paused", "hi");
    body["stream"] = json!(true);
    let reply = post_json(&gateway.url("/v1/chat/completions"), &body).await;
    assert_eq!(reply.status, 200);
    reply.events()
}

#[tokio::test]
async fn a_stream_that_goes_quiet_ends_with_a_timeout_event() {
    let quiet = pausing_stream(vec![Duration::ZERO], false).await;
    let events = stream_events(quiet, 300).await;
    assert!(events[0].contains(r#""content":"x""#), "{events:?}");
    // Had the upstream's close ended it, the stream would end without an error.
    let last: serde_json::Value = serde_json::from_str(events.last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "upstream_timeout", "{events:?}");
}

#[tokio::test]
async fn a_stream_with_short_pauses_outlasts_the_idle_timeout() {
    // Each pause is well under the 500 ms idle limit; the stream as a whole
    // is over it.
    let gaps = vec![Duration::from_millis(100); 8];
    let steady = pausing_stream(gaps, true).await;
    let events = stream_events(steady, 500).await;
    let content = events
        .iter()
        .filter(|e| e.contains(r#""content":"x""#))
        .count();
    assert_eq!(content, 8, "{events:?}");
    assert_eq!(
        events.last().map(String::as_str),
        Some("[DONE]"),
        "{events:?}"
    );
}

#[tokio::test]
async fn slow_upstream_is_504() {
    let stalling = fast_sim(&["faults.stall_rate=1", "faults.stall_ms=3000"]);
    let gateway = GatewayBuilder::new()
        .openai(
            "slow",
            "small",
            &stalling.base_url(),
            &["timeouts: {first_byte_ms: 300}"],
        )
        .start();
    let reply = post_json(&gateway.url("/v1/chat/completions"), &chat("slow", "hi")).await;
    assert_eq!(reply.status, 504);
    assert_eq!(reply.error()["code"], "upstream_timeout");
}

#[tokio::test]
async fn overload_is_503_with_retry_after() {
    // Gateway-side limit: one request at a time to this backend.
    let slow = support::sim("small", &["base_ttft_ms=1500", "jitter=0"]);
    let gateway = GatewayBuilder::new()
        .openai("one", "small", &slow.base_url(), &["max_concurrency: 1"])
        .start();
    let url = gateway.url("/v1/chat/completions");
    let first = tokio::spawn({
        let url = url.clone();
        async move { post_json(&url, &chat("one", "first")).await }
    });
    // Wait until the first request holds the slot (the simulator sees it).
    assert!(
        support::eventually(
            async || support::get(&slow.url("/sim/stats")).await.json()["active"] == 1
        )
        .await
    );
    let second = post_json(&url, &chat("one", "second")).await;
    assert_eq!(second.status, 503);
    assert_eq!(second.header("retry-after"), Some("1"));
    assert_eq!(second.error()["type"], "overloaded_error");
    assert_eq!(first.await.unwrap().status, 200);

    // Upstream-side limit: a full simulator queue answers 503, passed on as 503.
    let full = support::sim(
        "small",
        &[
            "base_ttft_ms=1500",
            "jitter=0",
            "max_concurrency=1",
            "max_queue=0",
        ],
    );
    let gateway = GatewayBuilder::new()
        .openai("busy", "small", &full.base_url(), &[])
        .start();
    let url = gateway.url("/v1/chat/completions");
    let first = tokio::spawn({
        let url = url.clone();
        async move { post_json(&url, &chat("busy", "first")).await }
    });
    assert!(
        support::eventually(
            async || support::get(&full.url("/sim/stats")).await.json()["active"] == 1
        )
        .await
    );
    let second = post_json(&url, &chat("busy", "second")).await;
    assert_eq!(second.status, 503);
    assert!(second.header("retry-after").is_some());
    assert_eq!(second.error()["code"], "upstream_overloaded");
    assert_eq!(first.await.unwrap().status, 200);
    tokio::time::sleep(Duration::from_millis(10)).await;
}

#[tokio::test]
async fn the_messages_endpoint_answers_errors_in_anthropics_shape() {
    let upstream = fast_sim(&[]);
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &upstream.base_url(), &[])
        .start();
    let url = gateway.url("/v1/messages?beta=true");
    let missing = post_json(&url, &json!({"model": "local", "messages": []})).await;
    assert_eq!(missing.status, 400);
    let body = missing.json();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_tokens")
    );
    let unknown = post_json(
        &url,
        &json!({"model": "nope", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}),
    )
    .await;
    assert_eq!(
        (
            unknown.status.as_u16(),
            unknown.json()["error"]["type"].as_str()
        ),
        (404, Some("not_found_error"))
    );
    let untranslatable = post_json(&url, &json!({"model": "local", "max_tokens": 5, "mcp_servers": [], "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(untranslatable.status, 400);
    assert!(
        untranslatable.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("mcp_servers")
    );
    let head = send(Method::HEAD, &gateway.url("/"), None, Vec::new(), false).await;
    assert_eq!(head.status, 200);
}

/// A client that sends a whole oversized body before reading (as Python's
/// `http.client` does) reads a 413, not a broken pipe: with its length
/// declared, and chunked.
#[tokio::test]
async fn a_client_that_sends_a_too_large_body_first_reads_the_413() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let gateway = support::default_gateway();
    let body = vec![b'x'; 10 * 1024 * 1024];
    let chunked = {
        let mut out = Vec::new();
        for piece in body.chunks(64 * 1024) {
            out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            out.extend_from_slice(piece);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n\r\n");
        out
    };
    let head =
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n";
    for (framing, payload) in [
        (format!("content-length: {}\r\n\r\n", body.len()), &body),
        ("transfer-encoding: chunked\r\n\r\n".to_owned(), &chunked),
    ] {
        let mut socket = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
        socket
            .write_all(format!("{head}{framing}").as_bytes())
            .await
            .unwrap();
        socket
            .write_all(payload)
            .await
            .expect("the whole body is taken");
        let mut answer = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(30), socket.read(&mut answer))
            .await
            .expect("an answer within 30 s")
            .expect("the answer is readable");
        let answer = String::from_utf8_lossy(&answer[..n]).to_string();
        assert!(answer.starts_with("HTTP/1.1 413"), "{framing:?}: {answer}");
    }
}

/// A client that sends half its headers and waits is disconnected once the
/// header read timeout passes, instead of holding a connection for ever.
#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let upstream = fast_sim(&[]);
    let gateway = GatewayBuilder::new()
        .server("header_read_timeout_ms: 300")
        .openai("local", "small", &upstream.base_url(), &[])
        .start();
    let mut socket = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
    socket
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    // Bounded: the test fails, rather than hangs, if the gateway waits.
    let closed =
        tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut answer)).await;
    assert!(closed.is_ok(), "the connection was still open after 10 s");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
}

/// A client that stalls mid-body gets a 408 in its endpoint's dialect once
/// the body read timeout passes.
#[tokio::test]
async fn a_client_that_stalls_mid_body_gets_a_408_in_its_dialect() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let upstream = fast_sim(&[]);
    let gateway = GatewayBuilder::new()
        .server("body_read_timeout_ms: 300")
        .openai("local", "small", &upstream.base_url(), &[])
        .start();
    for (path, dialect_type) in [
        ("/v1/chat/completions", "\"type\":\"invalid_request_error\""),
        ("/v1/messages", "\"type\":\"error\""),
    ] {
        let mut socket = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"model\":"
        );
        socket.write_all(head.as_bytes()).await.unwrap();
        let mut answer = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(10), socket.read(&mut answer))
            .await
            .expect("an answer within 10 s")
            .unwrap();
        let answer = String::from_utf8_lossy(&answer[..n]).to_string();
        assert!(answer.starts_with("HTTP/1.1 408"), "{path}: {answer}");
        assert!(answer.contains(dialect_type), "{path}: {answer}");
    }
}

/// A client may send its body slowly, but not pause longer than the body
/// idle timeout: a steady trickle is read whole, a stall is a 408 long
/// before the total body timeout.
#[tokio::test]
async fn a_client_that_pauses_mid_body_past_the_idle_timeout_gets_a_408() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let gateway = GatewayBuilder::new()
        .server("body_read_timeout_ms: 30000")
        .server("body_idle_timeout_ms: 400")
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {}", support::FAST_SIM_FIELDS),
        )
        .start();
    let body = serde_json::to_vec(&chat("local", "hi")).unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let answer = async |socket: &mut tokio::net::TcpStream| {
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut answer))
            .await
            .expect("an answer within 10 s, well before the 30 s body timeout")
            .unwrap();
        String::from_utf8_lossy(&answer).to_string()
    };
    // Ten bytes every 100 ms: slow, never idle for long.
    let mut trickle = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
    trickle.write_all(head.as_bytes()).await.unwrap();
    for piece in body.chunks(10) {
        trickle.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let read = answer(&mut trickle).await;
    assert!(read.starts_with("HTTP/1.1 200"), "{read}");
    // Half the body, then nothing.
    let mut stalled = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
    stalled.write_all(head.as_bytes()).await.unwrap();
    stalled.write_all(&body[..body.len() / 2]).await.unwrap();
    let refused = answer(&mut stalled).await;
    assert!(refused.starts_with("HTTP/1.1 408"), "{refused}");
}

/// The header read timeout is also the keep-alive idle timeout: after an
/// answer, a connection that sends no new request is closed.
#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let gateway = GatewayBuilder::new()
        .server("header_read_timeout_ms: 300")
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {}", support::FAST_SIM_FIELDS),
        )
        .start();
    let mut socket = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
    socket
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = vec![0u8; 4096];
    let n = socket.read(&mut answer).await.unwrap();
    assert!(String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 200"));
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut rest)).await;
    assert!(
        closed.is_ok(),
        "an idle connection was still open after 10 s"
    );
}

/// Admission before work: with as many bodies arriving as requests may be
/// in flight, the next request is a 503 before its body is read.
#[tokio::test]
async fn slow_uploaders_cannot_make_the_gateway_hold_more_bodies() {
    use tokio::io::AsyncWriteExt;
    let upstream = fast_sim(&[]);
    let gateway = GatewayBuilder::new()
        .server("max_concurrent_requests: 1")
        .openai("local", "small", &upstream.base_url(), &[])
        .start();
    // One client sends half a body and waits.
    let half_a_body = async || {
        let mut slow = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
        slow.write_all(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"model\":",
        )
        .await
        .unwrap();
        slow
    };
    let mut slow = half_a_body().await;
    // Its body holds the one place once the gateway has read its head;
    // from then on the next request is a 503. Polled: when the head is
    // read depends on the machine's load.
    let mut last = None;
    let refused = support::eventually(async || {
        let next = post_json(&gateway.url("/v1/chat/completions"), &chat("local", "hi")).await;
        let body = String::from_utf8_lossy(&next.body).to_string();
        if next.status == 503 {
            assert!(body.contains("reading as many request bodies"), "{body}");
            return true;
        }
        last = Some((next.status, body));
        // Our own request held the place while its body was read: if the
        // slow head came in then, it was the one refused, so it starts
        // again.
        let mut answer = [0u8; 64];
        match slow.try_read(&mut answer) {
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            _ => slow = half_a_body().await,
        }
        false
    })
    .await;
    assert!(refused, "never refused; the last answer: {last:?}");
    drop(slow);
    // Its place is free again.
    assert!(
        support::eventually(async || post_json(
            &gateway.url("/v1/chat/completions"),
            &chat("local", "hi")
        )
        .await
        .status
            == 200)
        .await
    );
}
