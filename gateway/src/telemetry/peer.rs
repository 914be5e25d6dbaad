//! Who a backend is, as the GenAI conventions name it: the provider and
//! each server's address.

use http::Uri;
use switchyard_policies::{Backend, BackendAdapter, Engine};

/// A backend's `gen_ai.provider.name` and its servers' addresses.
#[derive(Debug, Clone, Default)]
pub struct Peer {
    pub provider: &'static str,
    /// `server.address` and `server.port` of each replica, in config order.
    pub servers: Vec<Option<(String, u16)>>,
}

impl Peer {
    pub fn of(backend: &Backend) -> Self {
        match &backend.adapter {
            BackendAdapter::Sim(_) => Peer {
                provider: "switchyard.sim",
                servers: Vec::new(),
            },
            BackendAdapter::Anthropic(a) => Peer {
                provider: "anthropic",
                servers: vec![address(&a.base_url)],
            },
            BackendAdapter::Gemini(g) => Peer {
                provider: "gcp.gemini",
                servers: vec![address(&g.base_url)],
            },
            BackendAdapter::Azure(a) => Peer {
                provider: "azure.ai.openai",
                servers: vec![address(&a.endpoint)],
            },
            BackendAdapter::Vertex(v) => Peer {
                provider: "gcp.vertex_ai",
                servers: vec![address(&v.endpoint.clone().unwrap_or_else(|| {
                    switchyard_adapters::vertex::host_for(&v.location)
                }))],
            },
            BackendAdapter::Bedrock(b) => Peer {
                provider: "aws.bedrock",
                servers: vec![address(&b.endpoint.clone().unwrap_or_else(|| {
                    switchyard_adapters::bedrock::endpoint_for(&b.region)
                }))],
            },
            BackendAdapter::OpenAi(o) => Peer {
                provider: match o.engine {
                    Engine::Llamacpp => "llama.cpp",
                    Engine::Vllm => "vllm",
                    Engine::Sglang => "sglang",
                    Engine::Generic => provider_by_host(&o.base_url),
                },
                servers: o.replicas.iter().map(|url| address(url)).collect(),
            },
        }
    }

    /// The address of replica `replica`.
    pub fn server(&self, replica: usize) -> Option<&(String, u16)> {
        self.servers.get(replica).and_then(Option::as_ref)
    }
}

/// The well-known provider names of the hosted APIs; any other
/// OpenAI-compatible server is named for the API it speaks.
fn provider_by_host(base_url: &str) -> &'static str {
    let host = address(base_url).map(|(host, _)| host).unwrap_or_default();
    [
        ("api.openai.com", "openai"),
        ("api.deepseek.com", "deepseek"),
        ("api.groq.com", "groq"),
        ("api.mistral.ai", "mistral_ai"),
        ("api.x.ai", "x_ai"),
        ("api.perplexity.ai", "perplexity"),
        ("generativelanguage.googleapis.com", "gcp.gemini"),
    ]
    .into_iter()
    .find(|(known, _)| host == *known)
    .map_or("openai_compatible", |(_, name)| name)
}

fn address(url: &str) -> Option<(String, u16)> {
    let uri: Uri = url.parse().ok()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
        Some("https") => 443,
        _ => 80,
    });
    Some((host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_providers_come_from_the_base_url() {
        assert_eq!(
            address("http://127.0.0.1:8081/v1"),
            Some(("127.0.0.1".into(), 8081))
        );
        assert_eq!(
            address("https://api.openai.com/v1"),
            Some(("api.openai.com".into(), 443))
        );
        assert_eq!(address("http://[::1]:9/v1"), Some(("::1".into(), 9)));
        assert_eq!(provider_by_host("https://api.openai.com/v1"), "openai");
        assert_eq!(
            provider_by_host("http://10.0.0.2:8000/v1"),
            "openai_compatible"
        );
    }
}
