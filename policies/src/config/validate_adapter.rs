//! A backend's adapter section: exactly one of them, its URLs real URLs
//! and its secrets `env:NAME` references, never the secrets themselves.

use std::time::Duration;

use super::raw::{RawAnthropic, RawOpenAi, RawSim};
use super::raw_cloud::{RawAzure, RawBedrock, RawGemini, RawVertex};
use super::validate::{Checker, sim_params};
use super::{
    AnthropicBackend, AzureAuth, AzureBackend, BackendAdapter, BedrockBackend, BedrockKeys,
    ConfigError, GeminiBackend, OpenAiBackend, VertexBackend,
};

/// The adapter sections a backend may set, one of them.
pub(super) struct Adapters {
    pub openai: Option<RawOpenAi>,
    pub anthropic: Option<RawAnthropic>,
    pub sim: Option<RawSim>,
    pub gemini: Option<RawGemini>,
    pub azure: Option<RawAzure>,
    pub vertex: Option<RawVertex>,
    pub bedrock: Option<RawBedrock>,
}

const ADAPTER_NAMES: &str =
    "`openai`, `anthropic`, `gemini`, `azure`, `vertex`, `bedrock` or `sim`";

/// Where the Gemini API lives unless `base_url` says otherwise.
pub(super) const GEMINI_BASE_URL: &str = "https://generativelanguage.googleapis.com";

pub(super) fn validate_adapter(
    ck: &Checker<'_>,
    name: &str,
    raw: Adapters,
) -> Result<BackendAdapter, ConfigError> {
    let set = [
        raw.openai.is_some(),
        raw.anthropic.is_some(),
        raw.sim.is_some(),
        raw.gemini.is_some(),
        raw.azure.is_some(),
        raw.vertex.is_some(),
        raw.bedrock.is_some(),
    ]
    .into_iter()
    .filter(|set| *set)
    .count();
    if set != 1 {
        let which = if set == 0 { "one" } else { "only one" };
        return Err(ck.error(
            &["backends", name],
            format!("set {which} of {ADAPTER_NAMES}"),
        ));
    }
    if let Some(openai) = raw.openai {
        return Ok(BackendAdapter::OpenAi(validate_openai(ck, name, openai)?));
    }
    if let Some(anthropic) = raw.anthropic {
        let path = ["backends", name, "anthropic"];
        return Ok(BackendAdapter::Anthropic(AnthropicBackend {
            base_url: checked_url(
                ck,
                &[&path[..], &["base_url"]].concat(),
                &anthropic.base_url,
            )?,
            api_key_env: anthropic
                .api_key
                .map(|reference| env_reference(ck, &[&path[..], &["api_key"]].concat(), &reference))
                .transpose()?,
            version: anthropic.version,
            prompt_caching: anthropic.prompt_caching,
        }));
    }
    if let Some(gemini) = raw.gemini {
        return Ok(BackendAdapter::Gemini(validate_gemini(ck, name, gemini)?));
    }
    if let Some(azure) = raw.azure {
        return Ok(BackendAdapter::Azure(validate_azure(ck, name, azure)?));
    }
    if let Some(vertex) = raw.vertex {
        return Ok(BackendAdapter::Vertex(validate_vertex(ck, name, vertex)?));
    }
    if let Some(bedrock) = raw.bedrock {
        return Ok(BackendAdapter::Bedrock(validate_bedrock(
            ck, name, bedrock,
        )?));
    }
    let sim = raw
        .sim
        .ok_or_else(|| ck.error(&["backends", name], format!("set one of {ADAPTER_NAMES}")))?;
    Ok(BackendAdapter::Sim(sim_params(
        ck,
        &["backends", name, "sim"],
        sim,
    )?))
}

/// An http:// or https:// URL with a host, without its trailing `/`.
fn checked_url(ck: &Checker<'_>, path: &[&str], url: &str) -> Result<String, ConfigError> {
    let trimmed = url.trim_end_matches('/').to_owned();
    let scheme_ok = trimmed.starts_with("http://") || trimmed.starts_with("https://");
    let host_ok = trimmed
        .split("://")
        .nth(1)
        .is_some_and(|rest| !rest.is_empty());
    if scheme_ok && host_ok {
        Ok(trimmed)
    } else {
        Err(ck.error(path, format!("`{url}` is not an http:// or https:// URL")))
    }
}

/// The variable an `env:NAME` reference names. Anything else is refused
/// without echoing it: it may be a key pasted inline.
fn env_reference(ck: &Checker<'_>, path: &[&str], reference: &str) -> Result<String, ConfigError> {
    match reference.strip_prefix("env:") {
        Some(var) if !var.is_empty() => Ok(var.to_owned()),
        _ => Err(ck.error(
            path,
            "must be `env:NAME`, naming the environment variable that holds the key; keys are never written in config",
        )),
    }
}

fn validate_gemini(
    ck: &Checker<'_>,
    name: &str,
    raw: RawGemini,
) -> Result<GeminiBackend, ConfigError> {
    let path = ["backends", name, "gemini"];
    let at = |field| [&path[..], &[field]].concat();
    let base_url = checked_url(
        ck,
        &at("base_url"),
        raw.base_url.as_deref().unwrap_or(GEMINI_BASE_URL),
    )?;
    // The adapter adds the version; a base URL ending in one would double it.
    if ["/v1", "/v1beta", "/v1alpha"]
        .iter()
        .any(|v| base_url.ends_with(v))
    {
        return Err(ck.error(
            &at("base_url"),
            format!("`{base_url}` ends with an API version; give the server's root (the adapter adds /v1beta)"),
        ));
    }
    Ok(GeminiBackend {
        base_url,
        api_key_env: env_reference(ck, &at("api_key"), &raw.api_key)?,
    })
}

fn validate_azure(
    ck: &Checker<'_>,
    name: &str,
    raw: RawAzure,
) -> Result<AzureBackend, ConfigError> {
    let path = ["backends", name, "azure"];
    let at = |field| [&path[..], &[field]].concat();
    let endpoint = checked_url(ck, &at("endpoint"), &raw.endpoint)?;
    if endpoint.contains("/openai") {
        return Err(ck.error(
            &at("endpoint"),
            format!("`{endpoint}` holds a path; give the resource's root, e.g. https://NAME.openai.azure.com"),
        ));
    }
    let plain = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    if !plain(&raw.deployment) {
        return Err(ck.error(
            &at("deployment"),
            "a deployment name uses letters, digits and - _ . only",
        ));
    }
    if !(raw.api_version == "v1" || dated_version(&raw.api_version)) {
        return Err(ck.error(
            &at("api_version"),
            format!("`{}` is not an Azure OpenAI API version: a date such as 2024-10-21 (or 2025-04-01-preview), or v1", raw.api_version),
        ));
    }
    let auth = match (raw.api_key, raw.entra_token) {
        (Some(key), None) => AzureAuth::ApiKey(env_reference(ck, &at("api_key"), &key)?),
        (None, Some(token)) => {
            AzureAuth::EntraToken(env_reference(ck, &at("entra_token"), &token)?)
        }
        (None, None) => return Err(ck.error(&path, "set one of `api_key` or `entra_token`")),
        (Some(_), Some(_)) => {
            return Err(ck.error(&path, "set only one of `api_key` or `entra_token`"));
        }
    };
    Ok(AzureBackend {
        endpoint,
        deployment: raw.deployment,
        api_version: raw.api_version,
        auth,
    })
}

/// A cloud's region, location or project id: lowercase letters, digits
/// and `-`.
fn cloud_name(
    ck: &Checker<'_>,
    path: &[&str],
    name: &str,
    example: &str,
) -> Result<String, ConfigError> {
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if plain {
        Ok(name.to_owned())
    } else {
        Err(ck.error(
            path,
            format!(
                "`{name}` is not a name of lowercase letters, digits and -, such as `{example}`"
            ),
        ))
    }
}

fn validate_vertex(
    ck: &Checker<'_>,
    name: &str,
    raw: RawVertex,
) -> Result<VertexBackend, ConfigError> {
    let path = ["backends", name, "vertex"];
    let at = |field| [&path[..], &[field]].concat();
    if raw.credentials_file.as_deref() == Some("") {
        return Err(ck.error(
            &at("credentials_file"),
            "a path to a service account's key file",
        ));
    }
    if raw.anthropic_version.as_deref() == Some("") {
        return Err(ck.error(&at("anthropic_version"), "must not be empty"));
    }
    Ok(VertexBackend {
        project: cloud_name(ck, &at("project"), &raw.project, "my-project-123")?,
        location: cloud_name(ck, &at("location"), &raw.location, "us-east5")?,
        endpoint: raw
            .endpoint
            .map(|url| checked_url(ck, &at("endpoint"), &url))
            .transpose()?,
        credentials_file: raw.credentials_file,
        anthropic_version: raw.anthropic_version,
        prompt_caching: raw.prompt_caching,
    })
}

fn validate_bedrock(
    ck: &Checker<'_>,
    name: &str,
    raw: RawBedrock,
) -> Result<BedrockBackend, ConfigError> {
    let path = ["backends", name, "bedrock"];
    let at = |field| [&path[..], &[field]].concat();
    let reference =
        |field, value: Option<String>| value.map(|v| env_reference(ck, &at(field), &v)).transpose();
    let id = reference("access_key_id", raw.access_key_id)?;
    let secret = reference("secret_access_key", raw.secret_access_key)?;
    let token = reference("session_token", raw.session_token)?;
    let keys = match (id, secret) {
        (Some(access_key_id_env), Some(secret_access_key_env)) => Some(BedrockKeys {
            access_key_id_env,
            secret_access_key_env,
            session_token_env: token,
        }),
        (None, None) if token.is_none() => None,
        _ => {
            return Err(ck.error(
                &path,
                "access_key_id and secret_access_key go together (with session_token for temporary keys)",
            ));
        }
    };
    Ok(BedrockBackend {
        region: cloud_name(ck, &at("region"), &raw.region, "us-east-1")?,
        endpoint: raw
            .endpoint
            .map(|url| checked_url(ck, &at("endpoint"), &url))
            .transpose()?,
        keys,
        prompt_caching: raw.prompt_caching,
    })
}

/// `YYYY-MM-DD`, optionally followed by `-preview`.
fn dated_version(version: &str) -> bool {
    let date = version
        .strip_suffix("-preview")
        .unwrap_or(version)
        .as_bytes();
    date.len() == 10
        && date.iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        })
}

fn validate_openai(
    ck: &Checker<'_>,
    name: &str,
    raw: super::raw::RawOpenAi,
) -> Result<OpenAiBackend, ConfigError> {
    let checked_url =
        |url: &str, field: &str| checked_url(ck, &["backends", name, "openai", field], url);
    let url = checked_url(&raw.base_url, "base_url")?;
    let official = url.contains("://api.openai.com");
    let mut replicas = vec![url.clone()];
    for replica in &raw.replicas {
        replicas.push(checked_url(replica, "replicas")?);
    }
    let api_key_env = raw
        .api_key
        .map(|reference| env_reference(ck, &["backends", name, "openai", "api_key"], &reference))
        .transpose()?;
    let engine = raw.engine.unwrap_or_default();
    if raw.slots.is_some() && engine != super::Engine::Llamacpp {
        return Err(ck.error(
            &["backends", name, "openai", "slots"],
            "slots are llama.cpp's: set `engine: llamacpp`",
        ));
    }
    if raw.slots == Some(0) {
        return Err(ck.error(&["backends", name, "openai", "slots"], "must be positive"));
    }
    if let Some(metrics) = &raw.metrics_url
        && !(metrics.starts_with("http://") || metrics.starts_with("https://"))
    {
        return Err(ck.error(
            &["backends", name, "openai", "metrics_url"],
            format!("`{metrics}` is not an http:// or https:// URL"),
        ));
    }
    Ok(OpenAiBackend {
        metrics_url: raw.metrics_url.or_else(|| {
            (engine != super::Engine::Generic)
                .then(|| format!("{}/metrics", super::adapter::origin(&url)))
        }),
        base_url: url,
        api_key_env,
        native_responses: raw.responses,
        engine,
        slots: raw.slots,
        prompt_cache_key: raw.prompt_cache_key.unwrap_or(official),
        replicas,
        metrics_interval: Duration::from_millis(raw.metrics_interval_ms.unwrap_or(10_000).max(100)),
    })
}
