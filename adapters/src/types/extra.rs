//! `Extra`: the fields a type does not model, kept as they came.
//!
//! A JSON object map that is almost always empty: every message, choice,
//! usage and answer carries one, about 16 a chat request. Dropping an
//! empty `BTreeMap` still builds its consuming iterator and walks it, about
//! 60 instructions; `Extra` drops its map only when it holds something
//! (about 900 instructions a proxied chat request, by callgrind).

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// An object's unmodelled fields; a `serde_json::Map` through `Deref`.
#[derive(Clone, Default, PartialEq)]
pub struct Extra(ManuallyDrop<Map<String, Value>>);

impl Extra {
    pub fn new() -> Self {
        Extra(ManuallyDrop::new(Map::new()))
    }

    /// The map, taken out.
    pub fn into_map(mut self) -> Map<String, Value> {
        std::mem::take(&mut *self.0)
    }
}

impl Drop for Extra {
    fn drop(&mut self) {
        // An empty map owns no memory: there is nothing to free, and
        // leaving it undropped leaks nothing.
        if !self.0.is_empty() {
            drop(std::mem::take(&mut *self.0));
        }
    }
}

impl Deref for Extra {
    type Target = Map<String, Value>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for Extra {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl std::fmt::Debug for Extra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<Map<String, Value>> for Extra {
    fn from(map: Map<String, Value>) -> Self {
        Extra(ManuallyDrop::new(map))
    }
}

impl From<Extra> for Map<String, Value> {
    fn from(extra: Extra) -> Self {
        extra.into_map()
    }
}

impl From<Extra> for Value {
    fn from(extra: Extra) -> Self {
        Value::Object(extra.into_map())
    }
}

impl FromIterator<(String, Value)> for Extra {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        Extra::from(Map::from_iter(iter))
    }
}

impl IntoIterator for Extra {
    type Item = (String, Value);
    type IntoIter = serde_json::map::IntoIter;
    fn into_iter(self) -> Self::IntoIter {
        self.into_map().into_iter()
    }
}

impl<'a> IntoIterator for &'a Extra {
    type Item = (&'a String, &'a Value);
    type IntoIter = serde_json::map::Iter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a mut Extra {
    type Item = (&'a String, &'a mut Value);
    type IntoIter = serde_json::map::IterMut<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter_mut()
    }
}

impl Extend<(String, Value)> for Extra {
    fn extend<I: IntoIterator<Item = (String, Value)>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

impl Serialize for Extra {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Extra {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Map::deserialize(deserializer).map(Extra::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_reads_and_hands_back_its_fields() {
        let mut extra = Extra::new();
        assert!(extra.is_empty());
        extra.insert("a".into(), Value::from(1));
        extra.extend([("b".to_owned(), Value::from("x"))]);
        let copy = extra.clone();
        assert_eq!(copy, extra);
        assert_eq!(serde_json::to_string(&extra).unwrap(), r#"{"a":1,"b":"x"}"#);
        let back: Extra = serde_json::from_str(r#"{"a":1,"b":"x"}"#).unwrap();
        assert_eq!(back, extra);
        let map: Map<String, Value> = extra.into();
        assert_eq!(map.len(), 2);
        assert_eq!(Value::from(copy), Value::Object(map));
    }
}
