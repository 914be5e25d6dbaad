//! Files and batches as OpenAI's API shows them.

use serde_json::{Value, json};

use crate::batch::store::{BatchRow, FileRow, STATES};

pub fn file_object(file: &FileRow) -> Value {
    json!({
        "id": file.id, "object": "file", "bytes": file.bytes, "created_at": file.created_at,
        "filename": file.filename, "purpose": file.purpose, "expires_at": null,
        "status": "processed", "status_details": null,
    })
}

pub fn batch_object(batch: &BatchRow) -> Value {
    let mut object = json!({
        "id": batch.id, "object": "batch", "endpoint": batch.endpoint,
        "errors": batch.errors.as_deref().and_then(|e| serde_json::from_str::<Value>(e).ok()),
        "input_file_id": batch.input_file_id, "completion_window": batch.completion_window,
        "status": batch.status, "output_file_id": batch.output_file_id,
        "error_file_id": batch.error_file_id, "created_at": batch.created_at,
        "expires_at": batch.expires_at,
        "request_counts": {
            "total": batch.total, "completed": batch.completed, "failed": batch.failed,
        },
        "metadata": batch.metadata.as_deref().and_then(|m| serde_json::from_str::<Value>(m).ok()),
    });
    for (state, at) in STATES.iter().zip(batch.times) {
        object[format!("{state}_at")] = json!(at);
    }
    object
}

/// A page of a list, in OpenAI's shape.
pub fn list(data: Vec<Value>, has_more: bool) -> Value {
    json!({
        "object": "list",
        "first_id": data.first().map(|d| d["id"].clone()),
        "last_id": data.last().map(|d| d["id"].clone()),
        "has_more": has_more,
        "data": data,
    })
}
