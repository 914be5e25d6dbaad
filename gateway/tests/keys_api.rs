//! Keys as data: `/admin/keys` creates, lists, changes, rotates and
//! revokes keys kept in the ledger's database, each change in effect for
//! the next request and audited; `switchyard keys` drives the same API.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use serde_json::{Value, json};
use support::{GatewayBuilder, get_with, key_hash, post_with};

const ADMIN: &str = "sk-admin-keysapi";
const ALICE: &str = "sk-alice-keysapi";

fn builder(ledger: &std::path::Path) -> GatewayBuilder {
    GatewayBuilder::new()
        .in_process_sim("small", "small", support::FAST_SIM_FIELDS)
        .in_process_sim("large", "cloud", support::FAST_SIM_FIELDS)
        .route("auto", "strategy:\n  split:\n    weights: {small: 1}")
        .section(&format!(
            "ledger: {{path: '{}'}}\nauth:\n  admin_key_hash: \"{}\"\n  teams:\n    ops: {{}}\n  keys:\n    - {{name: alice, hash: \"{}\"}}\n",
            ledger.display(),
            key_hash(ADMIN),
            key_hash(ALICE)
        ))
}

async fn chat(gateway: &support::Proc, key: &str, model: &str) -> support::Reply {
    let auth = format!("Bearer {key}");
    let body =
        json!({"model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]});
    post_with(
        &gateway.url("/v1/chat/completions"),
        &body,
        &[("authorization", auth.as_str())],
    )
    .await
}

async fn admin_call(
    gateway: &support::Proc,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> support::Reply {
    let body = body.map_or(Vec::new(), |b| b.to_string().into_bytes());
    call_as(gateway, ADMIN, method, path, body).await
}

async fn call_as(
    gateway: &support::Proc,
    key: &str,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> support::Reply {
    let auth = format!("Bearer {key}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
    ];
    support::request(
        method.parse().unwrap(),
        &gateway.url(path),
        &headers,
        body,
        false,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_made_over_the_api_work_at_once_change_and_die_on_command() {
    let dir = support::unique_path("keys-api");
    std::fs::create_dir_all(&dir).unwrap();
    let ledger = dir.join("ledger.db");
    let mut gateway = builder(&ledger).start();

    // Made: the secret comes back once, and works for the next request,
    // within what the key may use.
    let made = admin_call(
        &gateway,
        "POST",
        "/admin/keys",
        Some(json!({"name": "ci", "team": "ops", "models": ["auto"]})),
    )
    .await;
    assert_eq!(made.status, 201, "{}", String::from_utf8_lossy(&made.body));
    let made = made.json();
    let secret = made["key"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("sk-sy-") && secret.len() > 60, "{made}");
    assert_eq!(
        (&made["state"], &made["team"], &made["source"]),
        (&json!("active"), &json!("ops"), &json!("api"))
    );
    assert_eq!(chat(&gateway, &secret, "auto").await.status, 200);
    let refused = chat(&gateway, &secret, "large").await;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.error()["code"], "model_not_allowed");
    let auth = format!("Bearer {secret}");
    let models = get_with(
        &gateway.url("/v1/models"),
        &[("authorization", auth.as_str())],
    )
    .await
    .json();
    let names: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["auto"]);
    // Its calls are billed to it and its team.
    let db = rusqlite::Connection::open(&ledger).unwrap();
    let mut rows = Vec::new();
    let billed = support::eventually(async || {
        rows = db
            .prepare("SELECT key, team FROM requests WHERE key = 'ci'")
            .unwrap()
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        !rows.is_empty()
    })
    .await;
    assert!(billed);
    assert_eq!(rows[0], ("ci".to_owned(), "ops".to_owned()));

    // Bad input: each a clear error naming what is wrong; nothing stored.
    for (body, status, param) in [
        (json!({"name": "ci"}), 409, None),
        (json!({"name": "alice"}), 409, None),
        (json!({"name": "x", "team": "nobody"}), 400, Some("team")),
        (
            json!({"name": "x", "requests_per_minute": 0}),
            400,
            Some("requests_per_minute"),
        ),
        (
            json!({"name": "x", "budget": {"daily_usd": -2}}),
            400,
            Some("budget.daily_usd"),
        ),
        (json!({"name": "x", "models": 5}), 400, Some("key")),
        (json!({"name": "x", "colour": "red"}), 400, Some("colour")),
        (json!({"name": "has space"}), 400, Some("name")),
        (json!({"team": "ops"}), 400, Some("name")),
        (
            json!({"name": "x", "expires_in": "soon"}),
            400,
            Some("expires_in"),
        ),
        (
            json!({"name": "x", "expires_at_ms": 5}),
            400,
            Some("expires_at_ms"),
        ),
    ] {
        let reply = admin_call(&gateway, "POST", "/admin/keys", Some(body.clone())).await;
        assert_eq!(
            reply.status,
            status,
            "{body}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        if let Some(param) = param {
            assert_eq!(reply.error()["param"], param, "{body}");
        }
    }
    let not_json = call_as(
        &gateway,
        ADMIN,
        "POST",
        "/admin/keys",
        b"{not json".to_vec(),
    )
    .await;
    assert_eq!(not_json.status, 400);
    // Only the admin key reaches any of it.
    for (method, path) in [
        ("GET", "/admin/keys"),
        ("POST", "/admin/keys"),
        ("DELETE", "/admin/keys/ci"),
    ] {
        let reply = call_as(&gateway, ALICE, method, path, Vec::new()).await;
        assert_eq!(reply.status, 401, "{method} {path}");
    }

    // Listed beside the file's key, never with a hash or secret.
    let list = admin_call(&gateway, "GET", "/admin/keys", None).await;
    let text = String::from_utf8_lossy(&list.body).into_owned();
    assert!(
        !text.contains("sha256") && !text.contains(&secret),
        "{text}"
    );
    let list: Value = serde_json::from_str(&text).unwrap();
    let names: Vec<(&str, &str)> = list["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["name"].as_str().unwrap(), k["source"].as_str().unwrap()))
        .collect();
    assert_eq!(names, [("alice", "config"), ("ci", "api")]);

    // Changed: the model list lifted.
    let changed = admin_call(
        &gateway,
        "PATCH",
        "/admin/keys/ci",
        Some(json!({"models": null})),
    )
    .await;
    assert_eq!(
        changed.status,
        200,
        "{}",
        String::from_utf8_lossy(&changed.body)
    );
    assert_eq!(chat(&gateway, &secret, "large").await.status, 200);
    // Rotated: the old secret is refused, the new one works.
    let rotated = admin_call(&gateway, "POST", "/admin/keys/ci/rotate", Some(json!({})))
        .await
        .json();
    let fresh = rotated["key"].as_str().unwrap().to_owned();
    assert_eq!(chat(&gateway, &secret, "auto").await.status, 401);
    assert_eq!(chat(&gateway, &fresh, "auto").await.status, 200);
    // The file's key cannot be changed here.
    assert_eq!(
        admin_call(&gateway, "DELETE", "/admin/keys/alice", None)
            .await
            .status,
        409
    );
    assert_eq!(
        admin_call(&gateway, "DELETE", "/admin/keys/nobody", None)
            .await
            .status,
        404
    );

    // Expiry: a key that runs out is refused, saying so.
    let soon = now_ms() + 1500;
    let brief = admin_call(
        &gateway,
        "POST",
        "/admin/keys",
        Some(json!({"name": "brief", "expires_at_ms": soon})),
    )
    .await
    .json();
    let brief_secret = brief["key"].as_str().unwrap().to_owned();
    assert_eq!(chat(&gateway, &brief_secret, "auto").await.status, 200);
    tokio::time::sleep(std::time::Duration::from_millis(1600)).await;
    let expired = chat(&gateway, &brief_secret, "auto").await;
    assert_eq!(expired.status, 401);
    assert!(
        expired.error()["message"]
            .as_str()
            .unwrap()
            .contains("expired")
    );

    // Kept across a restart: the store is the ledger's database.
    let survivor = admin_call(
        &gateway,
        "POST",
        "/admin/keys",
        Some(json!({"name": "survivor"})),
    )
    .await
    .json();
    let survivor = survivor["key"].as_str().unwrap().to_owned();
    gateway.terminate();
    let gateway = builder(&ledger).start();
    assert_eq!(chat(&gateway, &survivor, "auto").await.status, 200);
    assert_eq!(chat(&gateway, &fresh, "auto").await.status, 200);

    // Revoked: the next request is refused; the audit trail has every change.
    assert_eq!(
        admin_call(&gateway, "DELETE", "/admin/keys/ci", None)
            .await
            .status,
        200
    );
    assert_eq!(chat(&gateway, &fresh, "auto").await.status, 401);
    let ci = admin_call(&gateway, "GET", "/admin/keys/ci", None)
        .await
        .json();
    assert_eq!(ci["state"], "revoked");
    let actions: Vec<&str> = ci["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["revoke", "rotate", "update", "create"]);
    assert!(
        ci["audit"][0]["actor"]
            .as_str()
            .unwrap()
            .starts_with("admin key")
    );
    assert!(ci["audit"][0]["ts_ms"].as_i64().unwrap() > 0);

    // `switchyard keys` over the same API.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .arg("keys")
            .args(args)
            .args(["--url", &gateway.url("")])
            .env("SWITCHYARD_ADMIN_KEY", ADMIN)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, made, err) = cli(&[
        "create",
        "from-cli",
        "--team",
        "ops",
        "--models",
        "auto,small",
        "--daily-usd",
        "5",
        "--expires-in",
        "30d",
    ]);
    assert!(ok, "{err}");
    let made: Value = serde_json::from_str(&made).unwrap();
    assert_eq!(made["models"], json!(["auto", "small"]));
    assert_eq!(made["budget"], json!({"daily_usd": 5.0}));
    assert_eq!(
        chat(&gateway, made["key"].as_str().unwrap(), "auto")
            .await
            .status,
        200
    );
    let (ok, table, _) = cli(&["list"]);
    assert!(
        ok && table.contains("from-cli") && table.contains("revoked"),
        "{table}"
    );
    let (ok, _, err) = cli(&["create", "from-cli"]);
    assert!(!ok && err.contains("409"), "{err}");
    let (ok, _, err) = cli(&["revoke", "from-cli"]);
    assert!(ok, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Keys made through the API turn auth on, and revoking every one of them
/// does not turn it off again: the revoked secret and a keyless caller are
/// both refused. `/readyz` shows backends' details to the admin key only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_the_only_key_leaves_auth_on() {
    let dir = support::unique_path("keys-only-api");
    std::fs::create_dir_all(&dir).unwrap();
    let gateway = GatewayBuilder::new()
        .in_process_sim("small", "small", support::FAST_SIM_FIELDS)
        .section(&format!(
            "ledger: {{path: '{}'}}\nauth:\n  admin_key_hash: \"{}\"\n",
            dir.join("ledger.db").display(),
            key_hash(ADMIN)
        ))
        .start();
    let anonymous = || {
        let url = gateway.url("/v1/chat/completions");
        async move {
            let body = json!({"model": "small", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]});
            post_with(&url, &body, &[]).await.status
        }
    };
    assert_eq!(anonymous().await, 200, "no keys: auth is off");
    let made = admin_call(
        &gateway,
        "POST",
        "/admin/keys",
        Some(json!({"name": "only"})),
    )
    .await
    .json();
    let secret = made["key"].as_str().unwrap().to_owned();
    assert_eq!(anonymous().await, 401);
    assert_eq!(chat(&gateway, &secret, "small").await.status, 200);
    assert_eq!(
        admin_call(&gateway, "DELETE", "/admin/keys/only", None)
            .await
            .status,
        200
    );
    assert_eq!(chat(&gateway, &secret, "small").await.status, 401);
    assert_eq!(anonymous().await, 401, "auth stays on");
    // A stale change cannot bring it back.
    assert_eq!(
        admin_call(
            &gateway,
            "PATCH",
            "/admin/keys/only",
            Some(json!({"team": null}))
        )
        .await
        .status,
        404
    );
    let ready = get_with(&gateway.url("/readyz"), &[]).await.json();
    assert_eq!(
        ready["backends"],
        json!({"total": 1, "not_closed": 0, "credentials_failing": 0})
    );
    let auth = format!("Bearer {ADMIN}");
    let ready = get_with(&gateway.url("/readyz"), &[("authorization", auth.as_str())])
        .await
        .json();
    assert_eq!(ready["backends"][0]["name"], "small");
    let _ = std::fs::remove_dir_all(&dir);
}
