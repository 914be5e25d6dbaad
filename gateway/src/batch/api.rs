//! `/v1/files` and `/v1/batches` in OpenAI's shapes: upload (multipart),
//! list, retrieve, content and delete files; create, list, retrieve and
//! cancel batches. Each key sees only its own files and batches.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{Value, json};

use crate::admit::access::Caller;
use crate::batch::lines;
use crate::batch::objects::{batch_object, file_object, list};
use crate::batch::store::{BatchRow, FileRow, Store, StoreResult};
use crate::batch::{Batches, new_id, now_s, owner_of};
use crate::error::GatewayError;
use crate::http::{Body, bytes_response, json_response, parse_json};
use crate::state::app::App;

/// The endpoints a batch may run against.
const ENDPOINTS: [&str; 4] = [
    "/v1/responses",
    "/v1/chat/completions",
    "/v1/embeddings",
    "/v1/completions",
];

/// A list page's largest and default `limit`, as OpenAI's.
const FILES_PAGE: (usize, usize) = (10_000, 10_000);
const BATCHES_PAGE: (usize, usize) = (100, 20);

/// How long a batch has to finish.
const WINDOW_S: i64 = 24 * 3600;

/// What a path under `/files` or `/batches` names.
enum Target<'a> {
    Files,
    File(&'a str),
    FileContent(&'a str),
    Batches,
    Batch(&'a str),
    Cancel(&'a str),
}

fn target(path: &str) -> Option<Target<'_>> {
    let path = path.strip_prefix("/v1").unwrap_or(path);
    let id = |s: &str| !s.is_empty() && !s.contains('/');
    if path == "/files" {
        return Some(Target::Files);
    }
    if path == "/batches" {
        return Some(Target::Batches);
    }
    if let Some(rest) = path.strip_prefix("/files/") {
        return match rest.strip_suffix("/content") {
            Some(file) if id(file) => Some(Target::FileContent(file)),
            _ if id(rest) => Some(Target::File(rest)),
            _ => None,
        };
    }
    let rest = path.strip_prefix("/batches/")?;
    match rest.strip_suffix("/cancel") {
        Some(batch) if id(batch) => Some(Target::Cancel(batch)),
        _ if id(rest) => Some(Target::Batch(rest)),
        _ => None,
    }
}

/// Whether the path is one of the Files and Batches API's.
pub fn is_batch_path(path: &str) -> bool {
    target(path).is_some()
}

pub async fn serve(app: &App, req: Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let path = req.uri().path().to_owned();
    let (Some(batches), Some(target)) = (app.batches.as_deref(), target(&path)) else {
        return Err(GatewayError::NotFound { path });
    };
    let owner = owner_of(req.extensions().get::<Caller>());
    let method = req.method().clone();
    let wrong = |allowed: &'static str| GatewayError::MethodNotAllowed {
        path: path.clone(),
        method: method.to_string(),
        allowed,
    };
    let no_such = |object: &'static str, id: &str| GatewayError::NoSuchObject {
        object,
        id: id.to_owned(),
    };
    let store = batches.store.clone();
    match (target, &method) {
        (Target::Files, &Method::POST) => upload(app, batches, owner, req).await,
        (Target::Files, &Method::GET) => {
            let query = Query::of(&req);
            let purpose = query.get("purpose");
            let (after, ascending) = (query.get("after"), query.ascending());
            let limit = query.limit(FILES_PAGE)?;
            let files = blocking(store, move |s| {
                s.files(
                    &owner,
                    purpose.as_deref(),
                    (after.as_deref(), limit + 1, ascending),
                )
            })
            .await?;
            Ok(page(files.iter().map(file_object).collect(), limit))
        }
        (Target::Files, _) => Err(wrong("GET, POST")),
        (Target::File(id), &Method::GET) => {
            let wanted = id.to_owned();
            match blocking(store, move |s| s.file(&wanted, &owner)).await? {
                Some(file) => Ok(json_response(StatusCode::OK, &file_object(&file))),
                None => Err(no_such("File", id)),
            }
        }
        (Target::File(id), &Method::DELETE) => {
            let wanted = id.to_owned();
            let answer = json!({"id": id, "object": "file", "deleted": true});
            match blocking(store, move |s| s.delete_file(&wanted, &owner)).await? {
                true => Ok(json_response(StatusCode::OK, &answer)),
                false => Err(no_such("File", id)),
            }
        }
        (Target::File(_), _) => Err(wrong("GET, DELETE")),
        (Target::FileContent(id), &Method::GET) => {
            let _heavy = batches.heavy.acquire().await;
            let wanted = id.to_owned();
            match blocking(store, move |s| s.file_content(&wanted, &owner)).await? {
                Some(content) => Ok(bytes_response(
                    StatusCode::OK,
                    "application/octet-stream",
                    Bytes::from(content),
                )),
                None => Err(no_such("File", id)),
            }
        }
        (Target::FileContent(_), _) => Err(wrong("GET")),
        (Target::Batches, &Method::POST) => create(app, batches, owner, req).await,
        (Target::Batches, &Method::GET) => {
            let query = Query::of(&req);
            let (after, limit) = (query.get("after"), query.limit(BATCHES_PAGE)?);
            let rows = blocking(store, move |s| {
                s.batches(&owner, after.as_deref(), limit + 1)
            })
            .await?;
            Ok(page(rows.iter().map(batch_object).collect(), limit))
        }
        (Target::Batches, _) => Err(wrong("GET, POST")),
        (Target::Batch(id), &Method::GET) => {
            let wanted = id.to_owned();
            match blocking(store, move |s| s.batch(&wanted, Some(&owner))).await? {
                Some(batch) => Ok(json_response(StatusCode::OK, &batch_object(&batch))),
                None => Err(no_such("Batch", id)),
            }
        }
        (Target::Batch(_), _) => Err(wrong("GET")),
        (Target::Cancel(id), &Method::POST) => {
            cancel(batches, owner, id.to_owned(), no_such("Batch", id)).await
        }
        (Target::Cancel(_), _) => Err(wrong("POST")),
    }
}

/// Runs a store call off the runtime's threads.
pub async fn blocking<T: Send + 'static>(
    store: Arc<dyn Store>,
    work: impl FnOnce(&dyn Store) -> StoreResult<T> + Send + 'static,
) -> Result<T, GatewayError> {
    tokio::task::spawn_blocking(move || work(&*store))
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| format!("{e:#}")))
        .map_err(|message| {
            tracing::error!(%message, "batch store");
            GatewayError::Internal {
                message: "the batch store failed".into(),
            }
        })
}

/// A list page from `limit + 1` rows: the extra one says there are more.
fn page(mut data: Vec<Value>, limit: usize) -> Response<Body> {
    let more = data.len() > limit;
    data.truncate(limit);
    json_response(StatusCode::OK, &list(data, more))
}

/// `POST /v1/files`: a multipart form with `purpose` and `file`.
async fn upload(
    app: &App,
    batches: &Batches,
    owner: String,
    req: Request<Incoming>,
) -> Result<Response<Body>, GatewayError> {
    let _heavy = batches.heavy.acquire().await;
    let (parts, body) = req.into_parts();
    let bytes = app
        .read_upload(&parts, body, batches.settings.max_file_bytes)
        .await?;
    let form = crate::http::multipart::read_form(&parts.headers, bytes).await?;
    let invalid = |param: &str, message: &str| GatewayError::InvalidField {
        param: param.into(),
        message: message.into(),
    };
    let purpose = form
        .text("purpose")
        .ok_or_else(|| invalid("purpose", "required"))?;
    if purpose != "batch" {
        return Err(invalid(
            "purpose",
            "only `batch` files are kept here (the Files API serves batches)",
        ));
    }
    let (filename, content) = form
        .file("file")
        .ok_or_else(|| invalid("file", "required"))?;
    let file = FileRow {
        id: new_id("file-"),
        owner,
        purpose: purpose.to_owned(),
        filename: filename.to_owned(),
        bytes: content.len() as u64,
        created_at: now_s(),
    };
    let object = file_object(&file);
    let content = content.clone();
    blocking(batches.store.clone(), move |s| s.put_file(&file, &content)).await?;
    Ok(json_response(StatusCode::OK, &object))
}

/// `POST /v1/batches`: checks the request and its file, reads the file's
/// lines, and stores the batch for the runner.
async fn create(
    app: &App,
    batches: &Batches,
    owner: String,
    req: Request<Incoming>,
) -> Result<Response<Body>, GatewayError> {
    let (parts, body) = req.into_parts();
    let bytes = app.read_body(&parts, body).await?;
    let request: Value = parse_json(&bytes)?;
    let _heavy = batches.heavy.acquire().await;
    let invalid = |param: &str, message: String| GatewayError::InvalidField {
        param: param.into(),
        message,
    };
    let field = |name: &str| request.get(name).and_then(Value::as_str);
    let endpoint = field("endpoint").unwrap_or_default().to_owned();
    if !ENDPOINTS.contains(&endpoint.as_str()) {
        return Err(invalid(
            "endpoint",
            format!("must be one of {}", ENDPOINTS.join(", ")),
        ));
    }
    if field("completion_window") != Some("24h") {
        return Err(invalid("completion_window", "must be `24h`".into()));
    }
    let metadata = match request.get("metadata") {
        None | Some(Value::Null) => None,
        Some(m @ Value::Object(o)) if o.len() <= 16 && o.values().all(Value::is_string) => {
            Some(m.to_string())
        }
        Some(_) => {
            return Err(invalid("metadata", "at most 16 pairs of strings".into()));
        }
    };
    let file_id = field("input_file_id").unwrap_or_default().to_owned();
    let (id, who) = (file_id.clone(), owner.clone());
    let content = blocking(batches.store.clone(), move |s| {
        Ok(match s.file(&id, &who)? {
            Some(file) if file.purpose == "batch" => s.file_content(&id, &who)?,
            _ => None,
        })
    })
    .await?
    .ok_or_else(|| invalid("input_file_id", format!("no batch file `{file_id}`")))?;
    let now = now_s();
    let mut batch = BatchRow {
        id: new_id("batch_"),
        owner,
        endpoint: endpoint.clone(),
        input_file_id: file_id,
        completion_window: "24h".into(),
        metadata,
        created_at: now,
        expires_at: now + WINDOW_S,
        ..BatchRow::default()
    };
    let lines = match lines::read(&content, &endpoint, batches.settings.max_lines) {
        Ok(lines) => {
            batch.status = "in_progress".into();
            batch.times[0] = Some(now);
            batch.total = lines.len() as u64;
            lines
        }
        Err(unreadable) => {
            batch.status = "failed".into();
            batch.times[3] = Some(now);
            batch.errors = Some(unreadable.errors().to_string());
            Vec::new()
        }
    };
    let stored = batch.clone();
    blocking(batches.store.clone(), move |s| {
        s.create_batch(&stored, &lines)
    })
    .await?;
    let id = batch.id.clone();
    let batch = blocking(batches.store.clone(), move |s| s.batch(&id, None))
        .await?
        .unwrap_or(batch);
    batches.wake.notify_one();
    Ok(json_response(StatusCode::OK, &batch_object(&batch)))
}

/// `POST /v1/batches/{id}/cancel`: lines not yet started are not run; the
/// runner ends the batch `cancelled` once those running are answered.
async fn cancel(
    batches: &Batches,
    owner: String,
    id: String,
    not_found: GatewayError,
) -> Result<Response<Body>, GatewayError> {
    let now = now_s();
    let batch = blocking(batches.store.clone(), move |s| {
        if s.batch(&id, Some(&owner))?.is_none() {
            return Ok(None);
        }
        s.set_status(&id, "cancelling", &["in_progress"], now)?;
        s.batch(&id, Some(&owner))
    })
    .await?
    .ok_or(not_found)?;
    if !matches!(batch.status.as_str(), "cancelling" | "cancelled") {
        return Err(GatewayError::Conflict {
            message: format!("the batch is {}: it cannot be cancelled", batch.status),
        });
    }
    batches.wake.notify_one();
    Ok(json_response(StatusCode::OK, &batch_object(&batch)))
}

/// A request's query parameters.
struct Query(String);

impl Query {
    fn of(req: &Request<Incoming>) -> Query {
        Query(req.uri().query().unwrap_or("").to_owned())
    }

    fn get(&self, name: &str) -> Option<String> {
        crate::admin::api::query_value(&self.0, name)
    }

    /// `limit`: 1 to `max`, `default` when unset (OpenAI's bounds: files
    /// are listed up to 10,000 at once, batches up to 100).
    fn limit(&self, (max, default): (usize, usize)) -> Result<usize, GatewayError> {
        match self.get("limit") {
            None => Ok(default),
            Some(limit) => limit
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| GatewayError::InvalidField {
                    param: "limit".into(),
                    message: format!("a number from 1 to {max}"),
                }),
        }
    }

    fn ascending(&self) -> bool {
        self.get("order").as_deref() == Some("asc")
    }
}
