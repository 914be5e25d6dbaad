use http::StatusCode;
use http::header::RETRY_AFTER;
use serde_json::json;
use switchyard_adapters::AdapterError;

use super::kinds::*;

#[test]
fn upstream_client_errors_keep_the_backends_code() {
    let err = GatewayError::Upstream(AdapterError::Status {
        status: 400,
        message: "too long".into(),
        body: Some(
            json!({"message": "too long", "type": "invalid_request_error", "code": "context_length_exceeded"}),
        ),
        retry_after: None,
    });
    let object = err.error_object();
    assert_eq!(object["code"], "context_length_exceeded");
    assert_eq!(err.into_response().status(), StatusCode::BAD_REQUEST);
}

#[test]
fn a_backends_words_never_reach_the_caller() {
    let leaky = "invalid key sk-proj-1234567890 at http://10.1.2.3:8000/internal";
    let errors = [
        AdapterError::Status {
            status: 400,
            message: leaky.into(),
            body: Some(json!({"message": leaky, "type": leaky, "code": "bad_thing"})),
            retry_after: None,
        },
        AdapterError::Status {
            status: 500,
            message: leaky.into(),
            body: None,
            retry_after: None,
        },
        AdapterError::Status {
            status: 401,
            message: leaky.into(),
            body: Some(json!({"message": leaky, "type": "authentication_error"})),
            retry_after: None,
        },
        AdapterError::Connect {
            message: leaky.into(),
        },
        AdapterError::Reset {
            message: leaky.into(),
        },
        AdapterError::Protocol {
            message: leaky.into(),
        },
    ];
    for err in errors {
        let err = GatewayError::Upstream(err);
        for body in [
            err.error_object().to_string(),
            err.anthropic_error_object().to_string(),
        ] {
            assert!(
                !body.contains("sk-proj") && !body.contains("10.1.2.3"),
                "{body}"
            );
        }
    }
}

#[test]
fn refused_gateway_credentials_are_a_502() {
    for status in [401, 403] {
        let err = GatewayError::Upstream(AdapterError::Status {
            status,
            message: "Incorrect API key provided: sk-abc***xyz".into(),
            body: None,
            retry_after: None,
        });
        assert_eq!(err.kind(), "upstream_auth");
        assert_eq!(err.error_object()["code"], "upstream_credentials_refused");
        assert_eq!(err.into_response().status(), StatusCode::BAD_GATEWAY);
    }
}

#[test]
fn overload_says_when_to_retry() {
    let response = GatewayError::Overloaded {
        what: "full".into(),
    }
    .into_response();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()[RETRY_AFTER], "1");
}

#[test]
fn a_window_refusal_names_the_window_in_each_servers_words() {
    let refusal = |body: serde_json::Value| AdapterError::Status {
        status: 400,
        message: body["message"].as_str().unwrap_or("").to_owned(),
        body: Some(body),
        retry_after: None,
    };
    let openai = refusal(
        json!({"message": "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.", "code": "context_length_exceeded"}),
    );
    assert_eq!(super::upstream::window_refusal(&openai), Some(Some(8192)));
    let llamacpp = refusal(
        json!({"message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}),
    );
    assert_eq!(super::upstream::window_refusal(&llamacpp), Some(Some(4096)));
    let anthropic = refusal(
        json!({"message": "prompt is too long: 210000 tokens > 200000 maximum", "type": "invalid_request_error", "code": "context_length_exceeded"}),
    );
    assert_eq!(
        super::upstream::window_refusal(&anthropic),
        Some(Some(200000))
    );
    let unnamed = refusal(json!({"message": "too long", "code": "context_length_exceeded"}));
    assert_eq!(super::upstream::window_refusal(&unnamed), Some(None));
    let other = refusal(json!({"message": "bad temperature", "code": "invalid_value"}));
    assert_eq!(super::upstream::window_refusal(&other), None);
}

#[test]
fn a_rate_limited_backend_says_when_to_come_back_in_every_dialect() {
    let limited = |retry_after| {
        GatewayError::Upstream(AdapterError::Status {
            status: 429,
            message: "Too many requests".into(),
            body: None,
            retry_after,
        })
    };
    for dialect in [super::Dialect::OpenAi, super::Dialect::Anthropic] {
        let response = limited(Some(std::time::Duration::from_secs(7))).into_response_for(dialect);
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[RETRY_AFTER], "7");
        // A backend that did not say: a second.
        let response = limited(None).into_response_for(dialect);
        assert_eq!(response.headers()[RETRY_AFTER], "1");
    }
}

#[test]
fn a_content_filter_refusal_keeps_its_code_and_says_so() {
    let err = GatewayError::Upstream(AdapterError::Status {
        status: 400,
        message: "The response was filtered".into(),
        body: Some(
            json!({"message": "The response was filtered", "type": null, "param": "prompt", "code": "content_filter"}),
        ),
        retry_after: None,
    });
    let object = err.error_object();
    assert_eq!(object["code"], "content_filter");
    assert_eq!(object["param"], "prompt");
    assert!(
        object["message"]
            .as_str()
            .unwrap()
            .contains("content filter")
    );
    assert_eq!(err.into_response().status(), StatusCode::BAD_REQUEST);
}
