//! Every phase of a connection has a limit: sockets that never send a whole
//! first request head (silent, part of the HTTP/2 preface, the preface and
//! SETTINGS, half an HTTP/1 head) are closed at `header_read_timeout_ms` and
//! give their slot back; so is an HTTP/1 connection whose next head does
//! not come whole in that time, while an HTTP/2 one may idle past it; an
//! idle HTTP/2 connection is closed; a connection past
//! `max_connection_age_ms` is asked to go. Real sockets on loopback.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use support::{FAST_SIM_FIELDS, GatewayBuilder, Proc};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
const SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];

fn gateway(server: &[&str]) -> Proc {
    server
        .iter()
        .fold(GatewayBuilder::new(), |builder, line| builder.server(line))
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .start()
}

/// Reads until the gateway closes the socket; `None` if it is still open
/// after `wait`.
async fn closed_within(socket: &mut TcpStream, wait: Duration) -> Option<Vec<u8>> {
    let mut seen = Vec::new();
    match tokio::time::timeout(wait, socket.read_to_end(&mut seen)).await {
        Ok(_) => Some(seen),
        Err(_) => None,
    }
}

#[tokio::test]
async fn sockets_that_never_send_a_request_head_are_closed_and_free_their_slots() {
    let gateway = gateway(&["max_connections: 4", "header_read_timeout_ms: 600"]);
    let openings: [&[&[u8]]; 4] = [
        &[],                             // connects and says nothing
        &[&PREFACE[..10]],               // part of the HTTP/2 preface
        &[PREFACE, SETTINGS],            // preface and SETTINGS, then nothing
        &[b"GET /healthz HTTP/1.1\r\n"], // half an HTTP/1 head
    ];
    let mut sockets = Vec::new();
    for opening in openings {
        let mut socket = TcpStream::connect(gateway.addr).await.unwrap();
        for bytes in opening {
            socket.write_all(bytes).await.unwrap();
        }
        sockets.push(socket);
    }
    // All four slots are taken: a real client waits in the backlog.
    let mut client = TcpStream::connect(gateway.addr).await.unwrap();
    client
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    for (n, socket) in sockets.iter_mut().enumerate() {
        assert!(
            closed_within(socket, Duration::from_secs(10))
                .await
                .is_some(),
            "opening {n} still holds its connection"
        );
    }
    let answer = closed_within(&mut client, Duration::from_secs(10))
        .await
        .expect("the waiting client was served once the silent sockets were closed");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// An HTTP/2 connection over `socket`, and the task driving it (it ends
/// when the gateway closes the connection).
async fn h2(
    gateway: &Proc,
) -> (
    hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    tokio::task::JoinHandle<()>,
) {
    let socket = TcpStream::connect(gateway.addr).await.unwrap();
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(socket))
            .await
            .unwrap();
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    (sender, driver)
}

/// `None` when the connection refused the request (it is closing).
async fn healthz(
    sender: &mut hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
) -> Option<u16> {
    let request = http::Request::get("http://x/healthz")
        .body(Empty::new())
        .unwrap();
    let response = sender.send_request(request).await.ok()?;
    let status = response.status().as_u16();
    response.into_body().collect().await.unwrap();
    Some(status)
}

#[tokio::test]
async fn an_idle_http2_connection_is_closed() {
    let gateway = gateway(&["http2_idle_timeout_ms: 1000"]);
    let (mut sender, driver) = h2(&gateway).await;
    // Busy connections stay: requests closer together than the timeout,
    // for longer than it (ten 150 ms gaps against 1 s).
    for _ in 0..10 {
        assert_eq!(healthz(&mut sender).await, Some(200));
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert!(!driver.is_finished(), "closed while in use");
    tokio::time::timeout(Duration::from_secs(10), driver)
        .await
        .expect("the idle connection was closed")
        .unwrap();
}

#[tokio::test]
async fn a_connection_past_its_age_is_asked_to_go_even_when_busy() {
    let gateway = gateway(&["max_connection_age_ms: 500"]);
    let (mut sender, driver) = h2(&gateway).await;
    let began = std::time::Instant::now();
    while !driver.is_finished() && began.elapsed() < Duration::from_secs(10) {
        if sender.ready().await.is_err() {
            break;
        }
        // A request the connection took is answered in full.
        match healthz(&mut sender).await {
            Some(status) => assert_eq!(status, 200),
            None => break,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::timeout(Duration::from_secs(5), driver)
        .await
        .expect("the old connection was closed")
        .unwrap();
}

/// After an answer, an HTTP/1 client has the header read timeout to send
/// its next head whole: a connection in use for longer than the timeout
/// stays, and half a head followed by silence is disconnected at it, long
/// before the idle timeout.
#[tokio::test]
async fn a_busy_http1_connection_stays_and_half_a_next_head_is_closed() {
    let gateway = gateway(&[
        "header_read_timeout_ms: 1000",
        "http2_idle_timeout_ms: 60000",
    ]);
    let mut socket = TcpStream::connect(gateway.addr).await.unwrap();
    // Busy is not idle: requests closer together than the timeout keep
    // the connection, for longer than it (eight 200 ms gaps against 1 s).
    for gap in [0, 200, 200, 200, 200, 200, 200, 200, 200] {
        tokio::time::sleep(Duration::from_millis(gap)).await;
        socket
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(10), socket.read(&mut answer))
            .await
            .expect("an answer within 10 s")
            .unwrap();
        assert!(
            String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 200"),
            "a connection in use was closed"
        );
    }
    socket
        .write_all(b"GET /healthz HTTP/1.1\r\nhost:")
        .await
        .unwrap();
    let rest = closed_within(&mut socket, Duration::from_secs(10))
        .await
        .expect("the half head's connection was still open after 10 s");
    let rest = String::from_utf8_lossy(&rest);
    assert!(rest.is_empty(), "{rest}");
}

/// The header read timeout is HTTP/1's: an HTTP/2 connection may sit idle
/// past it, up to its own idle timeout.
#[tokio::test]
async fn an_http2_connection_may_idle_past_the_header_read_timeout() {
    let gateway = gateway(&[
        "header_read_timeout_ms: 1000",
        "http2_idle_timeout_ms: 20000",
    ]);
    let (mut sender, driver) = h2(&gateway).await;
    assert_eq!(healthz(&mut sender).await, Some(200));
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert!(!driver.is_finished(), "closed at HTTP/1's header timeout");
    assert_eq!(healthz(&mut sender).await, Some(200));
}
