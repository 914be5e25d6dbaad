//! Load for kill -9 tests: chat requests from several tasks until they
//! are stopped, keeping the ids of the answers a client saw complete.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use super::{post_with, short};

pub struct KillLoad {
    workers: Vec<tokio::task::JoinHandle<()>>,
    completed: Arc<Mutex<Vec<String>>>,
}

impl KillLoad {
    /// `workers` tasks send chat requests to `url` (every other one
    /// streamed), each with an `x-request-id` starting with `tag`.
    pub fn start(url: &str, workers: usize, tag: &str) -> KillLoad {
        let completed = Arc::new(Mutex::new(Vec::new()));
        let workers = (0..workers)
            .map(|w| {
                let (url, completed, tag) = (url.to_owned(), completed.clone(), tag.to_owned());
                tokio::spawn(async move {
                    for i in 0.. {
                        let id = format!("{tag}-{w}-{i}");
                        let mut body = short("load", "auto");
                        body["stream"] = json!(i % 2 == 0);
                        let reply = tokio::time::timeout(
                            Duration::from_secs(5),
                            post_with(&url, &body, &[("x-request-id", &id)]),
                        )
                        .await;
                        let Ok(reply) = reply else { break };
                        let whole = reply.status == 200
                            && (body["stream"] == false
                                || reply.events().last().map(String::as_str) == Some("[DONE]"));
                        if whole {
                            completed.lock().unwrap().push(id);
                        }
                    }
                })
            })
            .collect();
        KillLoad { workers, completed }
    }

    /// Stops the tasks; the ids of the answers that completed whole.
    pub fn stop(self) -> Vec<String> {
        for worker in self.workers {
            worker.abort();
        }
        self.completed.lock().unwrap().clone()
    }
}
