//! HTTPS on the listener, with a certificate made for the test by openssl:
//! curl (HTTP/1.1 and HTTP/2 by ALPN) reaches the gateway over TLS, plain
//! HTTP does not, and a certificate that cannot be read stops the start.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{FAST_SIM_FIELDS, GatewayBuilder, Proc};

/// Runs openssl with `args`, failing the test if it fails.
fn openssl(args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A new P-256 key, `-keyout`, for the openssl `req` that makes it.
const NEW_KEY: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
];

/// `dir/name.pem` and `dir/name.key`: a self-signed certificate for
/// `subject` (with openssl's CA extensions), with `extra` arguments.
fn self_signed(dir: &Path, name: &str, subject: &str, extra: &[&str]) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    let (cert_arg, key_arg) = (cert.display().to_string(), key.display().to_string());
    let mut args = vec![
        "req", "-x509", "-days", "1", "-subj", subject, "-keyout", &key_arg, "-out", &cert_arg,
    ];
    args.extend(NEW_KEY);
    args.extend(extra);
    openssl(&args);
    (cert, key)
}

/// `dir/name.pem` and `dir/name.key`: a version 3 certificate for `subject`
/// signed by `ca` (its `.pem` and `.key`), with `extensions` (webpki, and so
/// rustls, takes nothing else).
fn signed_by(
    ca: &(PathBuf, PathBuf),
    dir: &Path,
    name: &str,
    subject: &str,
    extensions: &str,
) -> (PathBuf, PathBuf) {
    signed_for_days(ca, dir, name, subject, extensions, "1")
}

/// The same, valid for `days` from now (`-1`: it expired yesterday).
fn signed_for_days(
    ca: &(PathBuf, PathBuf),
    dir: &Path,
    name: &str,
    subject: &str,
    extensions: &str,
    days: &str,
) -> (PathBuf, PathBuf) {
    let path = |ext: &str| dir.join(format!("{name}.{ext}")).display().to_string();
    let mut request = vec!["req", "-new", "-subj", subject];
    let (key, csr) = (path("key"), path("csr"));
    request.extend(["-keyout", &key, "-out", &csr]);
    request.extend(NEW_KEY);
    openssl(&request);
    std::fs::write(path("ext"), extensions).unwrap();
    let (ca_cert, ca_key) = (ca.0.display().to_string(), ca.1.display().to_string());
    openssl(&[
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        &ca_cert,
        "-CAkey",
        &ca_key,
        "-CAcreateserial",
        "-days",
        days,
        "-extfile",
        &path("ext"),
        "-out",
        &path("pem"),
    ]);
    (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    )
}

/// A self-signed certificate for 127.0.0.1 and localhost, and its key.
fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    self_signed(
        dir,
        "cert",
        "/CN=localhost",
        &["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
    )
}

/// A gateway serving HTTPS with `cert` and `key`, a fast simulator named
/// `local` behind it.
fn https_gateway(cert: &Path, key: &Path) -> Proc {
    GatewayBuilder::new()
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
        .start()
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
    let gateway = https_gateway(&cert, &key);
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

/// A renewed certificate is served without a restart: the files are read
/// again when they change.
#[tokio::test]
async fn a_renewed_certificate_is_served_without_a_restart() {
    let dir = support::unique_path("tls-renew");
    let (cert, key) = certificate(&dir.join("first"));
    let (renewed_cert, renewed_key) = certificate(&dir.join("renewed"));
    let gateway = https_gateway(&cert, &key);
    let healthz = format!("https://127.0.0.1:{}/healthz", gateway.addr.port());
    assert_eq!(curl(&healthz, &cert, &[]).1, "200");
    assert_ne!(
        curl(&healthz, &renewed_cert, &[]).1,
        "200",
        "not trusted yet"
    );
    // Renewal as a tool does it: the new files over the old names.
    std::fs::copy(&renewed_key, &key).unwrap();
    std::fs::copy(&renewed_cert, &cert).unwrap();
    let served = support::eventually(async || curl(&healthz, &renewed_cert, &[]).1 == "200").await;
    assert!(served, "the renewed certificate was never served");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A private CA and a server certificate it signed for 127.0.0.1, as
/// `(ca, cert, key)`.
fn private_ca_certificate(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca = self_signed(dir, "ca", "/CN=private ca", &[]);
    let server = signed_by(
        &ca,
        dir,
        "server",
        "/CN=backend",
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n",
    );
    (ca.0, server.0, server.1)
}

/// With a client CA, only clients presenting a certificate it signed get in.
#[tokio::test]
async fn a_client_ca_admits_only_the_clients_it_signed() {
    let dir = support::unique_path("tls-clients");
    let (cert, key) = certificate(&dir);
    // A client CA, and a client certificate it signs.
    let ca = self_signed(&dir, "ca", "/CN=clients", &[]);
    let client = signed_by(
        &ca,
        &dir,
        "client",
        "/CN=tenant",
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n",
    );
    let path = |p: &PathBuf| p.display().to_string();
    let gateway = GatewayBuilder::new()
        .server(&format!(
            "tls: {{cert_file: '{}', key_file: '{}', client_ca_file: '{}'}}",
            cert.display(),
            key.display(),
            path(&ca.0)
        ))
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .start();
    let healthz = format!("https://127.0.0.1:{}/healthz", gateway.addr.port());
    assert_ne!(curl(&healthz, &cert, &[]).1, "200", "no client certificate");
    let signed = curl(
        &healthz,
        &cert,
        &["--cert", &path(&client.0), "--key", &path(&client.1)],
    );
    assert_eq!(signed.1, "200");
    // A certificate the CA did not sign (the server's own) is refused.
    let stranger = curl(
        &healthz,
        &cert,
        &[
            "--cert",
            &cert.display().to_string(),
            "--key",
            &key.display().to_string(),
        ],
    );
    assert_ne!(stranger.1, "200");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A backend behind a private CA is reached over HTTPS by trusting that CA
/// (`tls.ca_file`); without it, the backend's certificate is refused.
#[tokio::test]
async fn a_backend_behind_a_private_ca_is_trusted_only_by_name() {
    let dir = support::unique_path("tls-egress");
    let (ca, cert, key) = private_ca_certificate(&dir);
    let upstream = https_gateway(&cert, &key);
    let base = format!("https://127.0.0.1:{}/v1", upstream.addr.port());
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  trusted:\n    tier: small\n    model: local\n    openai: {{base_url: '{base}'}}\n    tls: {{ca_file: '{}'}}\n    context_window: 8192\n  platform:\n    tier: small\n    model: local\n    openai: {{base_url: '{base}'}}\n    tls: {{roots: platform, ca_file: '{}'}}\n    context_window: 8192\n  untrusted:\n    tier: small\n    model: local\n    openai: {{base_url: '{base}'}}\n    context_window: 8192\n",
            ca.display(),
            ca.display()
        ))
        .start();
    let url = gateway.url("/v1/chat/completions");
    let trusted = support::post_json(&url, &support::chat("trusted", "hi")).await;
    assert_eq!(
        trusted.status,
        200,
        "{}",
        String::from_utf8_lossy(&trusted.body)
    );
    // The system's trust store in place of the built-in roots, beside the
    // private CA.
    let platform = support::post_json(&url, &support::chat("platform", "hi")).await;
    assert_eq!(
        platform.status,
        200,
        "{}",
        String::from_utf8_lossy(&platform.body)
    );
    let untrusted = support::post_json(&url, &support::chat("untrusted", "hi")).await;
    assert_eq!(untrusted.status, 502);
    assert_eq!(untrusted.error()["code"], "upstream_certificate_refused");
    assert!(
        untrusted.error()["message"]
            .as_str()
            .unwrap()
            .contains("signed by a CA the gateway does not trust"),
        "{:?}",
        untrusted.error()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A backend whose certificate expired, or names another host, is refused
/// with an error that says which, even though its CA is trusted.
#[tokio::test]
async fn expired_and_wrong_host_backend_certificates_are_refused_clearly() {
    let dir = support::unique_path("tls-bad-certs");
    let ca = self_signed(&dir, "ca", "/CN=private ca", &[]);
    let server =
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n";
    let expired = signed_for_days(
        &ca,
        &dir,
        "expired",
        "/CN=backend",
        &format!("{server}subjectAltName=IP:127.0.0.1\n"),
        "-1",
    );
    let elsewhere = signed_by(
        &ca,
        &dir,
        "elsewhere",
        "/CN=backend",
        &format!("{server}subjectAltName=DNS:elsewhere.example\n"),
    );
    let (expired_upstream, elsewhere_upstream) = (
        https_gateway(&expired.0, &expired.1),
        https_gateway(&elsewhere.0, &elsewhere.1),
    );
    let backend = |name: &str, upstream: &Proc| {
        format!(
            "  {name}:\n    tier: small\n    model: local\n    openai: {{base_url: 'https://127.0.0.1:{}/v1'}}\n    tls: {{ca_file: '{}'}}\n    context_window: 8192\n",
            upstream.addr.port(),
            ca.0.display()
        )
    };
    let gateway = GatewayBuilder::new()
        .backend_yaml(&backend("expired", &expired_upstream))
        .backend_yaml(&backend("elsewhere", &elsewhere_upstream))
        .start();
    let url = gateway.url("/v1/chat/completions");
    for (name, reason) in [
        ("expired", "expired"),
        ("elsewhere", "not valid for the backend's host name"),
    ] {
        let reply = support::post_json(&url, &support::chat(name, "hi")).await;
        assert_eq!(reply.status, 502, "{name}");
        let error = reply.error();
        assert_eq!(error["code"], "upstream_certificate_refused", "{name}");
        assert!(
            error["message"].as_str().unwrap().contains(reason),
            "{name}: {error}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A backend that asks for a client certificate (mTLS) gets the gateway's
/// (`tls.cert_file`, `tls.key_file`); without one the backend refuses the
/// handshake, and the caller is told so.
#[tokio::test]
async fn a_backend_that_asks_for_a_client_certificate_gets_the_gateways() {
    let dir = support::unique_path("tls-mtls");
    let (ca, cert, key) = private_ca_certificate(&dir);
    let clients = self_signed(&dir, "clients", "/CN=gateway clients", &[]);
    let gateway_cert = signed_by(
        &clients,
        &dir,
        "gateway",
        "/CN=switchyard",
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n",
    );
    let upstream = GatewayBuilder::new()
        .server(&format!(
            "tls: {{cert_file: '{}', key_file: '{}', client_ca_file: '{}'}}",
            cert.display(),
            key.display(),
            clients.0.display()
        ))
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .start();
    let base = format!("https://127.0.0.1:{}/v1", upstream.addr.port());
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  mutual:\n    tier: small\n    model: local\n    openai: {{base_url: '{base}'}}\n    tls: {{ca_file: '{}', cert_file: '{}', key_file: '{}'}}\n    context_window: 8192\n  anonymous:\n    tier: small\n    model: local\n    openai: {{base_url: '{base}'}}\n    tls: {{ca_file: '{}'}}\n    context_window: 8192\n    breaker: {{failures: 100}}\n",
            ca.display(),
            gateway_cert.0.display(),
            gateway_cert.1.display(),
            ca.display()
        ))
        .start();
    let url = gateway.url("/v1/chat/completions");
    let mutual = support::post_json(&url, &support::chat("mutual", "hi")).await;
    assert_eq!(
        mutual.status,
        200,
        "{}",
        String::from_utf8_lossy(&mutual.body)
    );
    // TLS 1.3 refuses a missing client certificate after the client thinks
    // the handshake is done: the backend's alert and its hang-up race, so
    // the caller is told of the certificate when the alert wins, else of a
    // reset. Both are 502s. Which wins depends on scheduling (under load
    // the hang-up can win every time), so the naming of the alert is
    // checked in `upstream::tests`, and here only that each try is one of
    // the two.
    for _ in 0..5 {
        let anonymous = support::post_json(&url, &support::chat("anonymous", "hi")).await;
        assert_eq!(anonymous.status, 502);
        let error = anonymous.error();
        match error["code"].as_str() {
            Some("upstream_certificate_refused") => {
                assert!(
                    error["message"]
                        .as_str()
                        .unwrap()
                        .contains("client certificate"),
                    "{error}"
                );
            }
            code => assert_eq!(code, Some("upstream_reset"), "{error}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client certificate whose key file is missing stops the start with the
/// setting's name, rather than failing every request later.
#[test]
fn a_missing_client_key_stops_the_start() {
    let yaml = "backends:\n  mutual:\n    tier: small\n    openai: {base_url: 'https://127.0.0.1:9/v1'}\n    tls: {cert_file: /nonexistent/cert.pem, key_file: /nonexistent/key.pem}\n";
    let path = support::write_temp_config(yaml);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tls.cert_file /nonexistent/cert.pem"),
        "{stderr}"
    );
    let _ = std::fs::remove_file(&path);
}

/// A client that completes the TLS handshake and then says nothing is
/// closed at `header_read_timeout_ms`, freeing its slot for the next one.
#[tokio::test]
async fn a_tls_handshake_then_silence_is_closed_and_frees_its_slot() {
    let dir = support::unique_path("tls-silent");
    let (cert, key) = certificate(&dir);
    let gateway = GatewayBuilder::new()
        .server(&format!(
            "tls: {{cert_file: '{}', key_file: '{}'}}",
            cert.display(),
            key.display()
        ))
        .server("max_connections: 1")
        .server("header_read_timeout_ms: 800")
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .start();
    // s_client handshakes, then waits on its open stdin and exits only when
    // the server closes the connection.
    let mut silent = Command::new("openssl")
        .args(["s_client", "-quiet", "-connect", &gateway.addr.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run openssl s_client");
    let began = std::time::Instant::now();
    let ended = loop {
        if let Some(status) = silent.try_wait().unwrap() {
            break Some(status);
        }
        if began.elapsed() > std::time::Duration::from_secs(15) {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    if ended.is_none() {
        let _ = silent.kill();
    }
    drop(silent.stdin.take());
    let _ = silent.wait();
    assert!(ended.is_some(), "the silent TLS client was never closed");
    let url = format!("https://127.0.0.1:{}/healthz", gateway.addr.port());
    let (_, status, _) = curl(&url, &cert, &[]);
    assert_eq!(status, "200", "the slot was freed");
}

/// What a client certificate's extensions say.
const CLIENT: &str =
    "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n";

/// Writes to `out` a CRL that `ca` (its `.pem` and `.key`) signs, listing
/// the certificates `revoked` (their `.pem`); DER when `der`, else PEM.
/// `openssl ca` keeps its own database: a fresh one beside `out` each time,
/// so the list holds exactly `revoked`. The CRL is written elsewhere and
/// then copied, as a tool would rotate one.
fn crl(ca: &(PathBuf, PathBuf), revoked: &[&Path], out: &Path, der: bool) {
    let db = support::unique_path("crl-db");
    std::fs::create_dir_all(&db).unwrap();
    std::fs::write(db.join("index.txt"), "").unwrap();
    std::fs::write(db.join("crlnumber"), "01\n").unwrap();
    let config = db.join("ca.cnf");
    std::fs::write(
        &config,
        format!(
            "[ca]\ndefault_ca = crl\n[crl]\ndatabase = {}\ncrlnumber = {}\ndefault_md = sha256\ndefault_crl_days = 1\n",
            db.join("index.txt").display(),
            db.join("crlnumber").display()
        ),
    )
    .unwrap();
    let arg = |p: &Path| p.display().to_string();
    let (config, ca_cert, ca_key) = (arg(&config), arg(&ca.0), arg(&ca.1));
    let signer = ["-config", &config, "-cert", &ca_cert, "-keyfile", &ca_key];
    for cert in revoked {
        let cert = arg(cert);
        let mut args = vec!["ca"];
        args.extend(signer);
        args.extend(["-revoke", &cert]);
        openssl(&args);
    }
    let pem = arg(&db.join("crl.pem"));
    let mut args = vec!["ca"];
    args.extend(signer);
    args.extend(["-gencrl", "-out", &pem]);
    openssl(&args);
    let made = if der {
        let der = arg(&db.join("crl.der"));
        openssl(&["crl", "-in", &pem, "-outform", "DER", "-out", &der]);
        der
    } else {
        pem
    };
    std::fs::copy(&made, out).unwrap();
    let _ = std::fs::remove_dir_all(&db);
}

/// A gateway serving HTTPS with `cert` and `key`, admitting clients by
/// `tls_extra` (the rest of its `server.tls`).
fn mtls_gateway(cert: &Path, key: &Path, tls_extra: &str) -> Proc {
    GatewayBuilder::new()
        .server(&format!(
            "tls: {{cert_file: '{}', key_file: '{}', {tls_extra}}}",
            cert.display(),
            key.display(),
        ))
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .start()
}

/// The status of `/healthz` fetched presenting `client` (`000`: no HTTP
/// answer, the handshake was refused).
fn status_as(healthz: &str, server_cert: &Path, client: &(PathBuf, PathBuf)) -> String {
    let (cert, key) = (
        client.0.display().to_string(),
        client.1.display().to_string(),
    );
    curl(healthz, server_cert, &["--cert", &cert, "--key", &key]).1
}

/// The client CA is read again when it changes: a rotated CA admits its
/// clients and no longer the old CA's, without a restart; a CA file that
/// does not parse keeps the running one.
#[tokio::test]
async fn a_rotated_client_ca_applies_to_new_connections_without_a_restart() {
    let dir = support::unique_path("tls-ca-rotation");
    let (cert, key) = certificate(&dir);
    let old_ca = self_signed(&dir.join("old"), "ca", "/CN=old clients", &[]);
    let new_ca = self_signed(&dir.join("new"), "ca", "/CN=new clients", &[]);
    let old_client = signed_by(&old_ca, &dir.join("old"), "client", "/CN=tenant", CLIENT);
    let new_client = signed_by(&new_ca, &dir.join("new"), "client", "/CN=tenant", CLIENT);
    let client_ca = dir.join("client-ca.pem");
    std::fs::copy(&old_ca.0, &client_ca).unwrap();
    let gateway = mtls_gateway(
        &cert,
        &key,
        &format!("client_ca_file: '{}'", client_ca.display()),
    );
    let healthz = format!("https://127.0.0.1:{}/healthz", gateway.addr.port());
    assert_eq!(status_as(&healthz, &cert, &old_client), "200");
    assert_eq!(
        status_as(&healthz, &cert, &new_client),
        "000",
        "not trusted yet"
    );
    // A CA file that does not parse is not taken: the old CA still admits
    // its clients after the watcher has seen it.
    std::fs::write(&client_ca, "-----BEGIN CERTIFICATE-----\nnot base64\n").unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert_eq!(status_as(&healthz, &cert, &old_client), "200");
    assert_eq!(status_as(&healthz, &cert, &new_client), "000");
    std::fs::copy(&new_ca.0, &client_ca).unwrap();
    let rotated =
        support::eventually(async || status_as(&healthz, &cert, &new_client) == "200").await;
    assert!(rotated, "the rotated client CA was never taken");
    assert_eq!(status_as(&healthz, &cert, &old_client), "000");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client certificate a CRL lists is refused at the handshake; another
/// the same CA signed still gets in. The CRL here is DER.
#[tokio::test]
async fn a_client_certificate_a_crl_lists_is_refused_at_the_handshake() {
    let dir = support::unique_path("tls-crl");
    let (cert, key) = certificate(&dir);
    let ca = self_signed(&dir, "ca", "/CN=clients", &[]);
    let revoked = signed_by(&ca, &dir, "revoked", "/CN=former tenant", CLIENT);
    let kept = signed_by(&ca, &dir, "kept", "/CN=tenant", CLIENT);
    let crl_file = dir.join("clients.crl");
    crl(&ca, &[&revoked.0], &crl_file, true);
    let gateway = mtls_gateway(
        &cert,
        &key,
        &format!(
            "client_ca_file: '{}', crl_files: ['{}']",
            ca.0.display(),
            crl_file.display()
        ),
    );
    let healthz = format!("https://127.0.0.1:{}/healthz", gateway.addr.port());
    assert_eq!(status_as(&healthz, &cert, &kept), "200");
    assert_eq!(status_as(&healthz, &cert, &revoked), "000");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A CRL is read again when it changes: a certificate it comes to list is
/// refused from the next connection on, without a restart.
#[tokio::test]
async fn a_crl_written_while_running_applies_to_new_connections() {
    let dir = support::unique_path("tls-crl-reload");
    let (cert, key) = certificate(&dir);
    let ca = self_signed(&dir, "ca", "/CN=clients", &[]);
    let revoked = signed_by(&ca, &dir, "revoked", "/CN=former tenant", CLIENT);
    let kept = signed_by(&ca, &dir, "kept", "/CN=tenant", CLIENT);
    let crl_file = dir.join("clients.crl");
    crl(&ca, &[], &crl_file, false);
    let gateway = mtls_gateway(
        &cert,
        &key,
        &format!(
            "client_ca_file: '{}', crl_files: ['{}']",
            ca.0.display(),
            crl_file.display()
        ),
    );
    let healthz = format!("https://127.0.0.1:{}/healthz", gateway.addr.port());
    assert_eq!(
        status_as(&healthz, &cert, &revoked),
        "200",
        "not revoked yet"
    );
    crl(&ca, &[&revoked.0], &crl_file, false);
    let refused = support::eventually(async || status_as(&healthz, &cert, &revoked) == "000").await;
    assert!(refused, "the new CRL was never taken");
    assert_eq!(status_as(&healthz, &cert, &kept), "200");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A CRL that cannot be read stops the start, named by its place in the
/// list.
#[test]
fn a_crl_that_cannot_be_read_stops_the_start() {
    let dir = support::unique_path("tls-bad-crl");
    let (cert, key) = certificate(&dir);
    let ca = self_signed(&dir, "ca", "/CN=clients", &[]);
    let good = dir.join("good.crl");
    crl(&ca, &[], &good, false);
    let bad = dir.join("bad.crl");
    std::fs::write(&bad, b"\x30\x03\x02\x01\x00").unwrap();
    let config = support::write_temp_config(&format!(
        "server:\n  tls: {{cert_file: '{}', key_file: '{}', client_ca_file: '{}', crl_files: ['{}', '{}']}}\nbackends:\n  local: {{tier: small, sim: {{preset: small}}}}\n",
        cert.display(),
        key.display(),
        ca.0.display(),
        good.display(),
        bad.display()
    ));
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&config);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("server.tls.crl_files[1] {}", bad.display())),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
