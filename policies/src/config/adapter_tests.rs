//! The managed-cloud and native-provider sections of a backend.

use super::tests::error_of;
use super::*;

fn with_backend(section: &str) -> String {
    format!(
        "
backends:
  cloud:
    tier: cloud
    model: gpt-4o
{section}
"
    )
}

fn adapter(section: &str) -> BackendAdapter {
    Config::from_yaml(&with_backend(section), "test.yaml")
        .unwrap()
        .backends["cloud"]
        .adapter
        .clone()
}

#[test]
fn azure_takes_a_deployment_a_version_and_one_credential() {
    let BackendAdapter::Azure(azure) = adapter(
        "    azure: {endpoint: https://acme.openai.azure.com/, deployment: gpt-4o-prod, api_version: 2024-10-21, api_key: env:AZURE_KEY}",
    ) else {
        panic!("not azure");
    };
    assert_eq!(
        azure.base_url(),
        "https://acme.openai.azure.com/openai/deployments/gpt-4o-prod"
    );
    assert_eq!(azure.auth, AzureAuth::ApiKey("AZURE_KEY".into()));
    let BackendAdapter::Azure(v1) = adapter(
        "    azure: {endpoint: https://acme.openai.azure.com, deployment: gpt-4o-prod, api_version: v1, entra_token: env:AZURE_TOKEN}",
    ) else {
        panic!("not azure");
    };
    assert!(v1.v1());
    assert_eq!(v1.base_url(), "https://acme.openai.azure.com/openai/v1");
    let config = Config::from_yaml(
        &with_backend("    azure: {endpoint: https://a.openai.azure.com, deployment: d, api_version: v1, entra_token: env:AZURE_TOKEN}"),
        "t.yaml",
    )
    .unwrap();
    assert_eq!(
        config.env_references(),
        [(
            "backends.cloud.azure.entra_token".to_owned(),
            "AZURE_TOKEN".to_owned()
        )]
    );
}

#[test]
fn bad_azure_sections_are_named() {
    let base = "endpoint: https://a.openai.azure.com, deployment: d, api_version: 2024-10-21";
    for (section, path, words) in [
        (
            format!("{{{base}}}"),
            "backends.cloud.azure",
            "set one of `api_key` or `entra_token`",
        ),
        (
            format!("{{{base}, api_key: env:K, entra_token: env:T}}"),
            "backends.cloud.azure",
            "only one",
        ),
        (
            format!("{{{base}, api_key: sk-inline-secret}}"),
            "backends.cloud.azure.api_key",
            "env:NAME",
        ),
        (
            "{endpoint: https://a.openai.azure.com, deployment: d, api_version: latest, api_key: env:K}"
                .to_owned(),
            "backends.cloud.azure.api_version",
            "2024-10-21",
        ),
        (
            "{endpoint: https://a.openai.azure.com/openai/v1, deployment: d, api_version: v1, api_key: env:K}"
                .to_owned(),
            "backends.cloud.azure.endpoint",
            "resource's root",
        ),
        (
            "{endpoint: https://a.openai.azure.com, deployment: 'my dep', api_version: v1, api_key: env:K}"
                .to_owned(),
            "backends.cloud.azure.deployment",
            "letters, digits",
        ),
    ] {
        let err = error_of(&with_backend(&format!("    azure: {section}")));
        assert_eq!(err.path, path, "{section}: {err}");
        assert!(err.message.contains(words), "{section}: {err}");
        assert!(!err.to_string().contains("sk-inline-secret"), "{err}");
    }
}

#[test]
fn gemini_defaults_to_googles_server_and_refuses_a_versioned_url() {
    let BackendAdapter::Gemini(gemini) = adapter("    gemini: {api_key: env:GEMINI_API_KEY}")
    else {
        panic!("not gemini");
    };
    assert_eq!(gemini.base_url, "https://generativelanguage.googleapis.com");
    assert_eq!(gemini.api_key_env, "GEMINI_API_KEY");
    let err = error_of(&with_backend(
        "    gemini: {base_url: https://generativelanguage.googleapis.com/v1beta, api_key: env:K}",
    ));
    assert_eq!(err.path, "backends.cloud.gemini.base_url");
    let err = error_of(&with_backend("    gemini: {api_key: AIzaSyInline}"));
    assert_eq!(err.path, "backends.cloud.gemini.api_key");
    assert!(!err.to_string().contains("AIzaSyInline"));
}

#[test]
fn a_backend_sets_exactly_one_adapter_section() {
    let err = error_of(&with_backend(
        "    gemini: {api_key: env:K}\n    openai: {base_url: http://127.0.0.1:1/v1}",
    ));
    assert_eq!(err.path, "backends.cloud");
    assert!(err.message.contains("set only one of"), "{err}");
    let err = error_of(&with_backend(""));
    assert!(err.message.contains("`gemini`, `azure`"), "{err}");
}
