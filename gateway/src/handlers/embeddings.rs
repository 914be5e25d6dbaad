//! `POST /v1/embeddings`. `encoding_format` (float or base64) goes to the
//! backend as the caller sent it. Routed like any request; a cascade route
//! uses its first backend (there is no answer to check).

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::Value;
use switchyard_adapters::tokens;
use switchyard_adapters::types::{EmbeddingRequest, Usage};
use switchyard_router::RequestView;

use super::record::RequestRecord;
use crate::app::App;
use crate::error::GatewayError;
use crate::http::{Body, json_response, parse_json, read_json_body};
use crate::receipts::{self, Served};
use crate::routing::{BodyHints, complete_view};

pub async fn serve(app: &App, req: Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let (parts, body) = req.into_parts();
    let bytes = read_json_body(&parts, body, app.max_body_bytes).await?;
    let mut request: EmbeddingRequest = parse_json(&bytes)?;
    validate(&request)?;
    let text = match &request.input {
        Value::String(s) => s.as_str(),
        Value::Array(items) => items.iter().find_map(Value::as_str).unwrap_or(""),
        _ => "",
    };
    let view = RequestView {
        model: &request.model,
        prompt_tokens: u32::try_from(tokens::estimate(text)).unwrap_or(u32::MAX),
        turns: 1,
        last_user_text: text,
        ..RequestView::default()
    };
    let hints = BodyHints {
        user: request.user.as_deref(),
        profile: None,
    };
    let decision = app.decide(&complete_view(view, &parts.headers, hints, &app.router)?)?;
    let served = Served::first_choice(&decision);
    let result = async {
        let _admission = app.admit(served.backend)?;
        let backend = &app.backends[served.backend];
        request.model.clone_from(&backend.upstream_model);
        let route = decision.route.map(|r| app.router.route_name(r));
        let mut record = RequestRecord::new("embeddings", route, served.reason, backend);
        match backend.provider.embeddings(request).await {
            Ok(response) => {
                let usage = response
                    .usage
                    .as_ref()
                    .map(|u| Usage::new(u.prompt_tokens, 0));
                record.usage(usage.as_ref());
                record.finish("ok");
                Ok(json_response(StatusCode::OK, &response))
            }
            Err(err) => {
                let err = GatewayError::from(err);
                record.finish(err.kind());
                Err(err)
            }
        }
    }
    .await;
    let mut response = result.unwrap_or_else(GatewayError::into_response);
    receipts::apply(app, &decision, served, response.headers_mut());
    Ok(response)
}

fn validate(req: &EmbeddingRequest) -> Result<(), GatewayError> {
    let empty = match &req.input {
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => true,
    };
    if empty {
        return Err(GatewayError::InvalidField {
            param: "input".into(),
            message: "must be a non-empty string or array".into(),
        });
    }
    if let Some(format) = req.encoding_format.as_deref()
        && format != "float"
        && format != "base64"
    {
        return Err(GatewayError::InvalidField {
            param: "encoding_format".into(),
            message: format!("`{format}` is not one of float, base64"),
        });
    }
    Ok(())
}
