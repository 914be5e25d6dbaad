//! Fields an engine takes in the request body: llama.cpp's per-request
//! speculative-decoding settings (the slot, `id_slot`, is chosen with the
//! replica, from the prefix index).
//! Fields the caller set are never overwritten. (The llama-server build
//! tested, 0.10434.0 from PyPI, accepts the speculative fields and ignores
//! them; a route's `speculative.instead` backend is how drafting stops there.)

use serde_json::{Value, json};
use switchyard_adapters::types::{Extra, Fields};
use switchyard_policies::{Engine, Speculative};
use switchyard_router::Decision;

use crate::state::app::App;

/// What to add to a request bound for backend `backend`.
pub fn body_fields(app: &App, decision: &Decision, backend: usize) -> Extra {
    let mut fields = Extra::new();
    let handle = &app.backends[backend];
    if handle.engine != Engine::Llamacpp {
        return fields;
    }
    let speculative = decision.route.and_then(|r| app.router.speculative(r));
    if let (Some(spec), Some(drafting)) = (speculative, decision.drafting) {
        speculative_fields(&mut fields, spec, drafting);
    }
    fields
}

fn speculative_fields(fields: &mut Fields, spec: &Speculative, drafting: bool) {
    if !drafting {
        // For builds that honour per-request settings: draft nothing.
        fields.insert("speculative.n_max".into(), json!(0));
        fields.insert("speculative.n_min".into(), json!(0));
        return;
    }
    if let Some(n) = spec.n_max {
        fields.insert("speculative.n_max".into(), json!(n));
    }
    if let Some(n) = spec.n_min {
        fields.insert("speculative.n_min".into(), json!(n));
    }
    if let Some(p) = spec.p_min {
        fields.insert("speculative.p_min".into(), json!(p));
    }
}

/// Sets vLLM's `cache_salt` to the tenant's salt (when its prefixes are not
/// shared with everyone), so the engine's KV cache itself is separated per
/// tenant, not only the gateway's index. The gateway's value replaces any
/// the caller sent: a caller does not choose whose cache it reads.
/// `fields` is asked for only then (asking makes the body's field map).
pub fn cache_salt<'a>(fields: impl FnOnce() -> Option<&'a mut Fields>, engine: Engine, salt: u64) {
    if engine == Engine::Vllm
        && salt != 0
        && let Some(extra) = fields()
    {
        extra.insert("cache_salt".into(), json!(format!("{salt:016x}")));
    }
}

/// Adds `fields` to a request body's extra fields, keeping the caller's.
pub fn apply(extra: &mut Fields, fields: &Extra) {
    for (name, value) in fields {
        extra
            .entry(name.clone())
            .or_insert_with(|| Value::clone(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_become_llama_cpp_fields_and_callers_win() {
        let spec = Speculative {
            n_max: Some(16),
            n_min: Some(2),
            p_min: Some(0.75),
            ..Speculative::default()
        };
        let mut fields = Extra::new();
        speculative_fields(&mut fields, &spec, true);
        assert_eq!(
            Value::from(fields.clone()),
            json!({"speculative.n_max": 16, "speculative.n_min": 2, "speculative.p_min": 0.75})
        );
        let mut body = Extra::new();
        body.insert("speculative.n_max".into(), json!(4));
        apply(&mut body, &fields);
        assert_eq!(body["speculative.n_max"], json!(4));
        assert_eq!(body["speculative.p_min"], json!(0.75));

        let mut off = Extra::new();
        speculative_fields(&mut off, &spec, false);
        assert_eq!(off["speculative.n_max"], json!(0));
    }
}
