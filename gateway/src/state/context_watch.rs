//! Learns each OpenAI-compatible backend's context window from its server,
//! when the config does not give one: llama.cpp's `/props`
//! (`default_generation_settings.n_ctx`), else `/v1/models`
//! (`max_model_len`, as vLLM, SGLang and `switchyard sim` report it).
//! Read at start-up and again every minute (a server can restart with
//! another size); a server that says nothing leaves the window unknown, and
//! every request is then taken to fit.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchyard_adapters::engine_metrics::fetch;
use switchyard_adapters::upstream::{HttpClient, http_client_trusting};
use switchyard_policies::{BackendAdapter, Config, Engine, Tier};

use crate::state::app::App;

const TIMEOUT: Duration = Duration::from_secs(3);
const EVERY: Duration = Duration::from_secs(60);

/// Reads a window from a server's answer, given the model's name.
type ReadWindow = fn(&Value, &str) -> Option<u32>;

/// A backend to ask, and where.
struct Asked {
    index: usize,
    name: String,
    url: String,
    read: ReadWindow,
    model: String,
    last: Option<u32>,
    /// A client that trusts what the backend's `tls:` says.
    client: HttpClient,
}

/// Starts the watcher when some backend's window is to be read.
pub fn spawn(config: &Config, app: Arc<App>) -> Option<tokio::task::AbortHandle> {
    let asked: Vec<Asked> = config
        .backends
        .values()
        .enumerate()
        // Cloud APIs do not say; asking them would only spend a request.
        .filter(|(_, backend)| backend.context_window.is_none() && backend.tier != Tier::Cloud)
        .filter_map(|(index, backend)| {
            let BackendAdapter::OpenAi(openai) = &backend.adapter else {
                return None;
            };
            let (url, read): (String, ReadWindow) = match openai.engine {
                Engine::Llamacpp => (format!("{}/props", openai.origin()), llama_cpp_n_ctx),
                _ => (format!("{}/models", openai.base_url), max_model_len),
            };
            let client = http_client_trusting(TIMEOUT, &backend.tls)
                .inspect_err(|err| tracing::warn!(backend = %backend.name, %err, "context window: no HTTP client"))
                .ok()?;
            Some(Asked {
                index,
                name: backend.name.clone(),
                url,
                read,
                model: backend.upstream_model.clone(),
                last: None,
                client,
            })
        })
        .collect();
    (!asked.is_empty()).then(|| tokio::spawn(watch(asked, app)).abort_handle())
}

async fn watch(mut asked: Vec<Asked>, app: Arc<App>) {
    let mut ticks = tokio::time::interval(EVERY);
    loop {
        ticks.tick().await;
        for a in &mut asked {
            let window = match fetch(&a.client, &a.url, TIMEOUT).await {
                Ok(text) => serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|answer| (a.read)(&answer, &a.model)),
                Err(err) => {
                    tracing::debug!(backend = %a.name, url = %a.url, %err, "context window unreadable");
                    None
                }
            };
            if let Some(window) = window.filter(|w| Some(*w) != a.last) {
                tracing::info!(backend = %a.name, window, "context window read from the server");
                app.router.set_context_window(a.index, window);
                a.last = Some(window);
            }
        }
    }
}

/// llama.cpp's `/props`: the context each slot holds.
fn llama_cpp_n_ctx(props: &Value, _model: &str) -> Option<u32> {
    let n_ctx = props["default_generation_settings"]["n_ctx"]
        .as_u64()
        .or_else(|| props["n_ctx"].as_u64())?;
    u32::try_from(n_ctx).ok().filter(|&n| n > 0)
}

/// `/v1/models`: the served model's `max_model_len` (the first model's
/// when none has the backend's name).
fn max_model_len(models: &Value, model: &str) -> Option<u32> {
    let data = models["data"].as_array()?;
    let entry = data
        .iter()
        .find(|m| m["id"] == model)
        .or_else(|| data.first())?;
    let len = entry["max_model_len"].as_u64()?;
    u32::try_from(len).ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn windows_as_engines_report_them() {
        let props =
            json!({"default_generation_settings": {"n_ctx": 4096, "params": {}}, "total_slots": 4});
        assert_eq!(llama_cpp_n_ctx(&props, "x"), Some(4096));
        let models = json!({"object": "list", "data": [
            {"id": "other", "max_model_len": 8192},
            {"id": "qwen", "max_model_len": 32768}]});
        assert_eq!(max_model_len(&models, "qwen"), Some(32768));
        assert_eq!(max_model_len(&models, "unknown"), Some(8192));
        assert_eq!(
            max_model_len(&json!({"data": [{"id": "gpt-4o"}]}), "gpt-4o"),
            None
        );
    }
}
