use serde::de::IgnoredAny;
use switchyard_adapters::types::ChatChunk;

const CHUNK: &str = r#"{"id":"chatcmpl-sim0000000","object":"chat.completion.chunk","created":1796587725,"model":"sim","choices":[{"index":0,"delta":{"content":" prompt"},"finish_reason":null}],"system_fingerprint":"switchyard-sim"}"#;

#[test]
fn scratch() {
    let mode = std::env::var("MODE").unwrap_or_default();
    let mut n = 0usize;
    for _ in 0..1000 {
        match mode.as_str() {
            "full" => {
                let r: ChatChunk = serde_json::from_str(CHUNK).unwrap();
                n += r.choices.len();
            }
            "value" => {
                let r: serde_json::Value = serde_json::from_str(CHUNK).unwrap();
                n += r.as_object().unwrap().len();
            }
            "ignore" => {
                let _r: IgnoredAny = serde_json::from_str(CHUNK).unwrap();
                n += 1;
            }
            _ => {
                n += 1;
            }
        }
    }
    assert!(n > 0);
}
