//! `POST /v1/embeddings`. `encoding_format` (float or base64) goes to the
//! backend as the caller sent it. Routed like any request; a cascade route
//! uses its first backend (there is no answer to check).

use std::sync::Arc;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::Value;
use switchyard_adapters::tokens;
use switchyard_adapters::types::{EmbeddingRequest, Usage};
use switchyard_router::RequestView;
use switchyard_router::prefix::Tenant;

use super::endpoint::{Size, worst_cost};
use super::record::{RequestContext, RequestRecord};
use crate::access::Caller;
use crate::app::App;
use crate::error::{Dialect, GatewayError};
use crate::http::{Body, json_response, parse_json, read_json_body};
use crate::receipts::{self, Served};
use crate::routing::{BodyHints, complete_view};

/// The endpoint's name in ledger rows and logs.
pub const NAME: &str = "embeddings";

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
    // Every input of a batch is billed: all of them are reserved for and
    // counted against tokens-per-minute, not only the first.
    let texts = request.texts();
    let all_inputs: usize = texts.iter().map(|t| tokens::estimate(t)).sum();
    let view = RequestView {
        model: &request.model,
        prompt_tokens: u32::try_from(all_inputs).unwrap_or(u32::MAX),
        turns: 1,
        last_user_text: text,
        ..RequestView::default()
    };
    let hints = BodyHints {
        user: request.user.as_deref(),
        profile: None,
    };
    let caller = parts.extensions.get::<Caller>().cloned();
    let decision = app.decide(&complete_view(view, &parts.headers, hints, &app.router)?)?;
    let served = Served::first_choice(&decision);
    let prompt_tokens = decision.features.prompt_tokens;
    let context = RequestContext::new(
        app,
        &parts,
        (NAME, Dialect::OpenAi),
        request.model.clone(),
        &decision,
        Arc::new((texts.join("\n"), 0)),
    );
    if let Some(caller) = &caller {
        app.rates.check_tokens(&caller.key.name, prompt_tokens)?;
    }
    let result = async {
        let backend = &app.backends[served.backend];
        let reservation = match &caller {
            None => None,
            Some(caller) => {
                // An encoder only reads: no output to reserve for.
                let worst = worst_cost(
                    backend,
                    Size {
                        prompt_tokens,
                        max_tokens: Some(0),
                        choices: 1,
                    },
                );
                let reservation = app
                    .budgets
                    .reserve(&caller.key, backend.is_cloud(), worst)?;
                Some(reservation)
            }
        };
        let admission = app.admit(served.backend, None, Tenant::default()).await?;
        request.model.clone_from(&backend.upstream_model);
        let record = RequestRecord::new(
            app,
            context,
            served.backend,
            served.reason,
            reservation,
            &admission,
            Some(decision.predicted_ttft_ms),
        );
        let embedded = admission.provider.embeddings(request).await;
        let response = record
            .settle_whole(embedded, |r| {
                r.usage.as_ref().map(|u| Usage::new(u.prompt_tokens, 0))
            })
            .await?;
        Ok(json_response(StatusCode::OK, &response))
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
