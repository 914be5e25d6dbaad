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

#[test]
fn vertex_takes_a_project_a_location_and_a_key_file_or_the_metadata_server() {
    let BackendAdapter::Vertex(vertex) = adapter(
        "    vertex: {project: my-project-1, location: us-east5, credentials_file: /etc/gcp/sa.json}",
    ) else {
        panic!("not vertex");
    };
    assert_eq!(vertex.credentials_file.as_deref(), Some("/etc/gcp/sa.json"));
    assert_eq!(vertex.endpoint, None);
    for (section, path) in [
        (
            "{project: My_Project, location: us-east5}",
            "backends.cloud.vertex.project",
        ),
        (
            "{project: p, location: 'us east'}",
            "backends.cloud.vertex.location",
        ),
        (
            "{project: p, location: global, endpoint: 'ftp://x'}",
            "backends.cloud.vertex.endpoint",
        ),
        (
            "{project: p, location: global, credentials_file: ''}",
            "backends.cloud.vertex.credentials_file",
        ),
    ] {
        let err = error_of(&with_backend(&format!("    vertex: {section}")));
        assert_eq!(err.path, path, "{section}: {err}");
    }
}

#[test]
fn bedrock_keys_come_in_pairs_as_env_references_or_from_aws_itself() {
    let BackendAdapter::Bedrock(bedrock) = adapter(
        "    bedrock: {region: us-east-1, access_key_id: env:AK, secret_access_key: env:SK, session_token: env:ST}",
    ) else {
        panic!("not bedrock");
    };
    let keys = bedrock.keys.as_ref().unwrap();
    assert_eq!(
        (
            keys.access_key_id_env.as_str(),
            keys.session_token_env.as_deref()
        ),
        ("AK", Some("ST"))
    );
    let config = Config::from_yaml(
        &with_backend(
            "    bedrock: {region: us-east-1, access_key_id: env:AK, secret_access_key: env:SK}",
        ),
        "t.yaml",
    )
    .unwrap();
    assert_eq!(config.env_references().len(), 2);
    let BackendAdapter::Bedrock(chain) = adapter("    bedrock: {region: eu-west-1}") else {
        panic!("not bedrock");
    };
    assert_eq!(chain.keys, None, "AWS's own variables or a web identity");
    for (section, path, words) in [
        (
            "{region: us-east-1, access_key_id: env:AK}",
            "backends.cloud.bedrock",
            "go together",
        ),
        (
            "{region: us-east-1, access_key_id: AKIAINLINE, secret_access_key: env:SK}",
            "backends.cloud.bedrock.access_key_id",
            "env:NAME",
        ),
        (
            "{region: US_EAST_1}",
            "backends.cloud.bedrock.region",
            "lowercase",
        ),
    ] {
        let err = error_of(&with_backend(&format!("    bedrock: {section}")));
        assert_eq!(err.path, path, "{section}: {err}");
        assert!(err.message.contains(words), "{section}: {err}");
        assert!(!err.to_string().contains("AKIAINLINE"));
    }
}
