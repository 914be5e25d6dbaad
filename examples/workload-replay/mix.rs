//! A mix of the use cases (`docs/src/routing/profiles.md`) as jobs: a chat question, a code
//! request, a four-turn agentic session with tool results and tool time
//! between turns, a question over a long shared document (RAG), a batch
//! item. Every job is drawn from a seed, so two runs (one per policy) send
//! the same work.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// Turns of an agentic session, and the tool time between them.
pub const AGENT_TURNS: usize = 4;
pub const TOOL_MS: std::ops::RangeInclusive<u64> = 200..=500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Chat,
    Code,
    Agentic,
    Rag,
    Batch,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Chat => "chat",
            Profile::Code => "code",
            Profile::Agentic => "agentic",
            Profile::Rag => "rag",
            Profile::Batch => "batch",
        }
    }
}

/// One job: the profile and the chat requests it sends, in order (an
/// agentic session's later turns are built from earlier answers, so only
/// its first is here; see [`next_turn`]).
pub struct Job {
    pub id: u64,
    pub profile: Profile,
    pub body: Value,
}

const TOPICS: [&str; 8] = [
    "train timetables",
    "river tides",
    "sourdough bread",
    "solar panels",
    "chess openings",
    "bicycle gears",
    "tea varieties",
    "city parks",
];

const CODE_TASKS: [&str; 6] = [
    "Write a Python function that merges two sorted lists, with tests.",
    "Write a Rust function that parses a semantic version string into three numbers.",
    "Write a JavaScript function that debounces another function.",
    "Write a Python class for a fixed-size ring buffer with push and pop.",
    "Write a SQL query that returns the five customers with the most orders.",
    "Write a Go function that reverses the words in a sentence.",
];

/// The shared document RAG questions are asked over (about 1,500 tokens):
/// the same text every time, so its prefix can be cached.
pub fn document() -> String {
    (0..60)
        .map(|i| {
            format!(
                "Section {i}. The gateway routes each request to a local or a cloud model; \
                 budgets bound the time to first token and the decode rate. "
            )
        })
        .collect()
}

const AGENT_SYSTEM: &str =
    "You are a coding agent. Use the tools to inspect the project, then answer briefly.";

fn agent_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "read_file", "description": "Read a file of the project",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
        {"type": "function", "function": {"name": "run_tests", "description": "Run the project's tests",
            "parameters": {"type": "object", "properties": {"filter": {"type": "string"}}}}}
    ])
}

/// The requests' temperature: 0.7, or `REPLAY_TEMPERATURE` (0 makes two
/// servers of one model comparable answer for answer).
fn temperature() -> f64 {
    std::env::var("REPLAY_TEMPERATURE")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0.7)
}

fn chat_body(messages: Value, max_tokens: u32) -> Value {
    json!({"messages": messages, "max_tokens": max_tokens, "temperature": temperature(),
           "stream": true, "stream_options": {"include_usage": true}})
}

/// The `n`th job of the run seeded `seed`.
pub fn job(seed: u64, id: u64) -> Job {
    let mut rng = StdRng::seed_from_u64(seed ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let draw: f64 = rng.random();
    let topic = TOPICS[rng.random_range(0..TOPICS.len())];
    let (profile, body) = if draw < 0.35 {
        let q = format!("In two or three sentences, what should a beginner know about {topic}?");
        (
            Profile::Chat,
            chat_body(json!([{"role": "user", "content": q}]), 64),
        )
    } else if draw < 0.60 {
        let task = CODE_TASKS[rng.random_range(0..CODE_TASKS.len())];
        (
            Profile::Code,
            chat_body(json!([{"role": "user", "content": task}]), 128),
        )
    } else if draw < 0.80 {
        let ask = format!("The tests about {topic} fail. Find out why.");
        let mut body = chat_body(
            json!([{"role": "system", "content": AGENT_SYSTEM}, {"role": "user", "content": ask}]),
            96,
        );
        body["tools"] = agent_tools();
        (Profile::Agentic, body)
    } else if draw < 0.90 {
        let q = format!("Using the document, how would a question about {topic} be routed?");
        let messages = json!([
            {"role": "system", "content": format!("Answer from this document.\n\n{}", document())},
            {"role": "user", "content": q}
        ]);
        (Profile::Rag, chat_body(messages, 64))
    } else {
        let item = format!("Summarise in one line: a note about {topic}, item {id}.");
        (
            Profile::Batch,
            chat_body(json!([{"role": "user", "content": item}]), 48),
        )
    };
    Job { id, profile, body }
}

/// The tool time after turn `turn` of session `id`, drawn from the seed too.
pub fn tool_ms(seed: u64, id: u64, turn: usize) -> u64 {
    let mut rng = StdRng::seed_from_u64(seed ^ id.rotate_left(17) ^ turn as u64);
    rng.random_range(TOOL_MS)
}

/// An agentic session's next turn: the answer so far (its text, or the
/// tool calls it made, with their results) appended to the conversation.
pub fn next_turn(body: &mut Value, answer_text: &str, tool_calls: &[Value], turn: usize) {
    let Some(messages) = body["messages"].as_array_mut() else {
        return;
    };
    if tool_calls.is_empty() {
        messages.push(json!({"role": "assistant", "content": answer_text}));
        messages.push(json!({"role": "user", "content": "Check the next file too."}));
        return;
    }
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": tool_calls}));
    for call in tool_calls {
        let result = format!(
            "turn {turn}: 12 tests passed, 1 failed: expected 3 items, found 2 (see src/lib.rs line {})",
            40 + turn * 7
        );
        messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": result}));
    }
}
