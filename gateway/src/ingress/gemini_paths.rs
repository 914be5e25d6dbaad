//! Gemini's paths: `/v1beta/models/{model}:{method}`, and the same under
//! `/v1` (google-genai 3 writes `v1`; Gemini CLI writes `v1beta`), plus
//! `GET /v1beta/models` and `GET /v1beta/models/{model}`. A model's name
//! may hold `:` and `/` itself, so the method is what follows the last `:`
//! and must be one of Gemini's (`error::gemini_method`).

use crate::error::gemini_method;

/// Endpoint keys, as `paths` matches endpoints.
pub const GENERATE: &str = "/gemini/generateContent";
pub const STREAM: &str = "/gemini/streamGenerateContent";
pub const COUNT_TOKENS: &str = "/gemini/countTokens";
pub const LIST: &str = "/gemini/models";
pub const ONE: &str = "/gemini/model";

/// The method a `/models/{model}:{method}` path (after any `/v1`) names,
/// as its endpoint key.
pub fn method(path: &str) -> Option<&'static str> {
    Some(match gemini_method(path)? {
        "generateContent" => GENERATE,
        "streamGenerateContent" => STREAM,
        _ => COUNT_TOKENS,
    })
}

/// The endpoint key of a Gemini path, or `None` for any other path.
pub fn endpoint(path: &str) -> Option<&'static str> {
    if let Some(rest) = path.strip_prefix("/v1beta") {
        return match rest {
            "/models" | "/models/" => Some(LIST),
            _ => method(rest).or_else(|| model_name(rest).map(|_| ONE)),
        };
    }
    // Under `/v1`, only model methods: `/v1/models` and `/v1/models/{id}`
    // are OpenAI's (or answer in Gemini's shapes by header).
    method(path.strip_prefix("/v1")?)
}

/// The model a method path names (`gemini-2.5-flash` in
/// `/v1beta/models/gemini-2.5-flash:generateContent`).
pub fn model_of(path: &str) -> Option<&str> {
    let rest = path
        .strip_prefix("/v1beta")
        .or_else(|| path.strip_prefix("/v1"))?;
    let (model, _) = rest.strip_prefix("/models/")?.rsplit_once(':')?;
    (!model.is_empty()).then_some(model)
}

/// The model a `/models/{model}` path names (no method).
pub fn model_name(rest: &str) -> Option<&str> {
    rest.strip_prefix("/models/").filter(|m| !m.is_empty())
}

/// How spans name a Gemini path.
pub fn route_template(key: &str, path: &str) -> &'static str {
    let v1 = !path.starts_with("/v1beta");
    match key {
        GENERATE if v1 => "/v1/models/{model}:generateContent",
        GENERATE => "/v1beta/models/{model}:generateContent",
        STREAM if v1 => "/v1/models/{model}:streamGenerateContent",
        STREAM => "/v1beta/models/{model}:streamGenerateContent",
        COUNT_TOKENS if v1 => "/v1/models/{model}:countTokens",
        COUNT_TOKENS => "/v1beta/models/{model}:countTokens",
        LIST => "/v1beta/models",
        ONE => "/v1beta/models/{model}",
        _ => "",
    }
}

/// Whether the query asks for server-sent events (`alt=sse`).
pub fn wants_sse(query: Option<&str>) -> bool {
    query.is_some_and(|q| q.split('&').any(|pair| pair == "alt=sse"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_follow_the_last_colon_of_any_model_name() {
        assert_eq!(
            endpoint("/v1beta/models/gemini-2.5-flash:generateContent"),
            Some(GENERATE)
        );
        assert_eq!(
            endpoint("/v1/models/gemini-2.5-flash:streamGenerateContent"),
            Some(STREAM)
        );
        let bedrock = "/v1beta/models/us.anthropic.claude-sonnet-4-5-20250929-v1:0:countTokens";
        assert_eq!(endpoint(bedrock), Some(COUNT_TOKENS));
        assert_eq!(
            model_of(bedrock),
            Some("us.anthropic.claude-sonnet-4-5-20250929-v1:0")
        );
        // An OpenAI model id with a colon is not a method.
        assert_eq!(endpoint("/v1/models/ft:gpt-4o:acme:1"), None);
        assert_eq!(endpoint("/v1/models"), None);
        assert_eq!(endpoint("/v1beta/models"), Some(LIST));
        assert_eq!(endpoint("/v1beta/models/auto"), Some(ONE));
        assert_eq!(endpoint("/v1beta/models/:generateContent"), Some(GENERATE));
        assert_eq!(model_of("/v1beta/models/:generateContent"), None);
    }

    #[test]
    fn sse_is_asked_for_by_alt() {
        assert!(wants_sse(Some("key=k&alt=sse")));
        assert!(!wants_sse(Some("alt=json")));
    }
}
