//! The pool against real servers on loopback: hyper's, and a bare TCP one
//! that hangs up when told.

use std::sync::atomic::{AtomicUsize, Ordering};

use http_body_util::BodyExt;
use hyper::service::service_fn;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// A hyper server that answers each request with its request line's
/// target; with `slow`, in two chunks 20 ms apart. Counts connections.
async fn hyper_server(slow: bool) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| async move {
                    let target = req.uri().to_string();
                    let body = if slow {
                        let (tx, rx) = tokio::sync::mpsc::channel::<
                            Result<hyper::body::Frame<Bytes>, std::convert::Infallible>,
                        >(2);
                        tokio::spawn(async move {
                            let _ = tx
                                .send(Ok(hyper::body::Frame::data(Bytes::from(target))))
                                .await;
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            let _ = tx
                                .send(Ok(hyper::body::Frame::data(Bytes::from_static(b"!"))))
                                .await;
                        });
                        http_body_util::StreamBody::new(tokio_stream_of(rx)).boxed()
                    } else {
                        Full::new(Bytes::from(target)).boxed()
                    };
                    Ok::<_, std::convert::Infallible>(Response::new(body))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(socket), service)
                    .await;
            });
        }
    });
    (port, accepted)
}

/// A receiver as a stream of frames.
fn tokio_stream_of<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send + 'static {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

fn post(target: &str) -> Request<Full<Bytes>> {
    let mut request = Request::new(Full::new(Bytes::from_static(b"{}")));
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = target.parse().unwrap();
    request.headers_mut().insert(
        http::header::HOST,
        http::HeaderValue::from_static("127.0.0.1"),
    );
    request
}

async fn text(response: Response<Incoming>) -> String {
    let body = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

fn pool(port: u16) -> Arc<PlainPool> {
    PlainPool::for_base_url(
        &format!("http://127.0.0.1:{port}/v1"),
        Duration::from_secs(2),
    )
    .unwrap()
}

/// Idle connections after the task that puts a streamed answer's
/// connection back has had its turn (at most a second).
async fn idle_after_put_back(pool: &PlainPool, expected: usize) -> usize {
    for _ in 0..100 {
        let idle = pool.idle.lock().unwrap().len();
        if idle == expected {
            return idle;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    pool.idle.lock().unwrap().len()
}

#[test]
fn only_plain_http_urls_get_a_pool() {
    assert!(PlainPool::for_base_url("https://api.openai.com/v1", Duration::from_secs(1)).is_none());
    let v6 = PlainPool::for_base_url("http://[::1]:9000/v1", Duration::from_secs(1)).unwrap();
    assert_eq!((v6.host.as_str(), v6.port), ("::1", 9000));
    let default =
        PlainPool::for_base_url("http://models.internal/v1", Duration::from_secs(1)).unwrap();
    assert_eq!(
        (default.host.as_str(), default.port),
        ("models.internal", 80)
    );
}

/// Whole answers one after another go over one connection, each request
/// line carrying the origin-form target it was given.
#[tokio::test]
async fn sequential_requests_share_one_connection() {
    let (port, accepted) = hyper_server(false).await;
    let pool = pool(port);
    for i in 0..5 {
        let target = format!("/v1/chat/completions?i={i}");
        let response = pool.request(post(&target)).await.unwrap();
        assert_eq!(text(response).await, target);
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

/// A streamed answer's connection comes back once its body is read, and
/// the next request takes it; two at once need two connections.
#[tokio::test]
async fn a_streamed_answers_connection_comes_back_after_its_body() {
    let (port, accepted) = hyper_server(true).await;
    let pool = pool(port);
    let response = pool.request(post("/v1/a")).await.unwrap();
    assert_eq!(
        pool.idle.lock().unwrap().len(),
        0,
        "busy until its body is read"
    );
    assert_eq!(text(response).await, "/v1/a!");
    assert_eq!(idle_after_put_back(&pool, 1).await, 1);
    let response = pool.request(post("/v1/b")).await.unwrap();
    assert_eq!(text(response).await, "/v1/b!");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    assert_eq!(idle_after_put_back(&pool, 1).await, 1);
    let (a, b) = tokio::join!(pool.request(post("/v1/c")), pool.request(post("/v1/d")));
    assert_eq!(text(a.unwrap()).await, "/v1/c!");
    assert_eq!(text(b.unwrap()).await, "/v1/d!");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

/// A server that answers (keep-alive, as far as its headers say) and hangs
/// up when told: the connection waits idle while it is open, and once the
/// server has closed it, it is never handed out; the next request gets a
/// new connection.
#[tokio::test]
async fn a_connection_the_server_closed_is_not_used_again() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let hang_up = Arc::new(tokio::sync::Notify::new());
    let (counted, told) = (accepted.clone(), hang_up.clone());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let told = told.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                // The head and the two-byte body.
                while !request.ends_with(b"\r\n\r\n{}") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = socket
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .await;
                told.notified().await;
            });
        }
    });
    let pool = pool(port);
    let response = pool.request(post("/v1/x")).await.unwrap();
    assert_eq!(text(response).await, "ok");
    assert_eq!(idle_after_put_back(&pool, 1).await, 1);
    hang_up.notify_one();
    // The connection's task sees the hang-up (within a second).
    for _ in 0..100 {
        if pool.idle.lock().unwrap()[0].sender.is_closed() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(pool.idle.lock().unwrap()[0].sender.is_closed());
    assert!(pool.take().is_none(), "a closed connection was handed out");
    let response = pool.request(post("/v1/y")).await.unwrap();
    assert_eq!(text(response).await, "ok");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_refused_connection_is_a_connect_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    match pool(port).request(post("/v1/x")).await {
        Err(AdapterError::Connect { message }) => {
            assert!(message.starts_with("tcp connect error"), "{message}");
        }
        other => panic!("expected a connect error, got {other:?}"),
    }
}
