//! The response cache's store: answers by key, with the route's settings.
//! Apart from the cache's plumbing (`response_cache`) because the running
//! config holds a store per route and must not import the request path.

use std::sync::Arc;

use moka::sync::Cache;
use switchyard_adapters::types::{ChatChunk, ChatResponse};
use switchyard_policies::ResponseCacheSettings;

/// A kept answer and the backend that gave it, by name: a cache outlives a
/// config reload, and backends' numbers change with the config.
pub struct Cached {
    pub answer: CachedAnswer,
    pub backend: Arc<str>,
}

pub enum CachedAnswer {
    Whole(Box<ChatResponse>),
    Stream(Vec<ChatChunk>),
}

pub struct ResponseCache {
    pub(crate) entries: Cache<u128, Arc<Cached>>,
    pub(crate) settings: ResponseCacheSettings,
}

impl ResponseCache {
    pub fn new(settings: ResponseCacheSettings) -> Self {
        ResponseCache {
            entries: Cache::builder()
                .max_capacity(settings.max_entries)
                .time_to_live(settings.ttl)
                .build(),
            settings,
        }
    }
}
