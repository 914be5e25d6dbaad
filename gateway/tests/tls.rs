//! HTTPS on the listener, with a certificate made for the test by openssl:
//! curl (HTTP/1.1 and HTTP/2 by ALPN) reaches the gateway over TLS, plain
//! HTTP does not, and a certificate that cannot be read stops the start.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{FAST_SIM_FIELDS, GatewayBuilder};

/// A self-signed certificate for 127.0.0.1 and localhost, and its key.
fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ])
        .args(["-days", "1", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("run openssl");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    (cert, key)
}

/// curl's answer to `url`: `(HTTP version, status, body)`.
fn curl(url: &str, ca: &Path, extra: &[&str]) -> (String, String, String) {
    let out = Command::new("curl")
        .args([
            "-s",
            "-S",
            "--max-time",
            "20",
            "-w",
            "\n%{http_version} %{http_code}",
        ])
        .arg("--cacert")
        .arg(ca)
        .args(extra)
        .arg(url)
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, tail) = text.rsplit_once('\n').unwrap_or(("", &text));
    let (version, status) = tail.split_once(' ').unwrap_or((tail, ""));
    (version.to_owned(), status.to_owned(), body.to_owned())
}

#[tokio::test]
async fn the_gateway_serves_https_with_http2_by_alpn() {
    let dir = support::unique_path("tls");
    let (cert, key) = certificate(&dir);
    let gateway = GatewayBuilder::new()
        .server(&format!(
            "tls: {{cert_file: '{}', key_file: '{}'}}",
            cert.display(),
            key.display()
        ))
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .start();
    let base = format!("https://127.0.0.1:{}", gateway.addr.port());
    let (version, status, _) = curl(&format!("{base}/healthz"), &cert, &["--http1.1"]);
    assert_eq!((version.as_str(), status.as_str()), ("1.1", "200"));
    let chat = r#"{"model": "local", "messages": [{"role": "user", "content": "hi"}]}"#;
    let (version, status, body) = curl(
        &format!("{base}/v1/chat/completions"),
        &cert,
        &[
            "--http2",
            "-H",
            "content-type: application/json",
            "-d",
            chat,
        ],
    );
    assert_eq!((version.as_str(), status.as_str()), ("2", "200"), "{body}");
    assert!(body.contains("chat.completion"), "{body}");
    // Plain HTTP to the TLS port is no request.
    let plain = curl(
        &format!("http://127.0.0.1:{}/healthz", gateway.addr.port()),
        &cert,
        &[],
    );
    assert_ne!(plain.1, "200");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_certificate_that_cannot_be_read_stops_the_start() {
    let config = support::write_temp_config(
        "server:\n  tls: {cert_file: /nonexistent/cert.pem, key_file: /nonexistent/key.pem}\nbackends:\n  local: {tier: small, sim: {preset: small}}\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&config);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("server.tls.cert_file"), "{stderr}");
}
