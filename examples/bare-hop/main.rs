//! The floor the gateway's overhead is measured against: a minimal hyper
//! pass-through that reads each request whole, forwards it with its
//! headers (`host` aside) to the same path upstream, and streams the
//! answer back. No parsing, routing, limits or records: what any HTTP hop
//! costs, so the gateway's count over this one's is what its features add.
//!
//! ```text
//! BARE_HOP_LISTEN=127.0.0.1:9000 BARE_HOP_UPSTREAM=http://127.0.0.1:9001 bare-hop
//! ```
//!
//! The overhead benchmark (`gateway/benches/overhead.rs`), the instruction
//! counts (`scripts/count-instructions.sh`) and the profile-guided build
//! (`scripts/build-pgo.sh`) start it. It exits normally on SIGTERM, so a
//! profiling build writes its profile.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::signal::unix::{SignalKind, signal};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listen = std::env::var("BARE_HOP_LISTEN").map_err(|_| "BARE_HOP_LISTEN is not set")?;
    let upstream =
        std::env::var("BARE_HOP_UPSTREAM").map_err(|_| "BARE_HOP_UPSTREAM is not set")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut stop = signal(SignalKind::terminate())?;
        tokio::select! {
            served = serve(&listen, upstream) => served,
            _ = stop.recv() => Ok(()),
        }
    })
}

async fn serve(listen: &str, upstream: String) -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    // Idle upstream connections kept for as many callers as the benchmark's
    // highest concurrency.
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(1024)
        .build(connector);
    loop {
        let (socket, _) = listener.accept().await?;
        socket.set_nodelay(true)?;
        let (client, upstream) = (client.clone(), upstream.clone());
        tokio::spawn(async move {
            let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                let (client, upstream) = (client.clone(), upstream.clone());
                async move {
                    let (parts, body) = req.into_parts();
                    let body = body.collect().await.map_err(boxed)?.to_bytes();
                    let uri = format!("{upstream}{}", parts.uri.path());
                    let mut forward = http::Request::builder().method(parts.method).uri(uri);
                    for (name, value) in &parts.headers {
                        if name != http::header::HOST {
                            forward = forward.header(name, value);
                        }
                    }
                    let forward = forward.body(Full::new(body)).map_err(boxed)?;
                    client.request(forward).await.map_err(boxed)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(socket), service)
                .await;
        });
    }
}

/// Why a request was not passed on: a concrete type, as hyper's server
/// wants of a service's error.
#[derive(Debug)]
struct HopError(String);

impl std::fmt::Display for HopError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HopError {}

fn boxed(err: impl std::error::Error) -> HopError {
    HopError(err.to_string())
}
