//! `Extra`: the fields a type does not model, kept as they came.
//!
//! A JSON object map that is almost always empty: every message, choice,
//! usage and answer carries one, about 16 a request for a whole chat
//! answer. Dropping an empty `BTreeMap` still builds its consuming
//! iterator and walks it, about 60 instructions; `Extra` skips the drop of
//! a map that was never written to (about 900 instructions a proxied chat
//! request, by callgrind).

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// An object's unmodelled fields; a `serde_json::Map` through `Deref`.
#[derive(Clone, Default)]
pub struct Extra {
    map: ManuallyDrop<Map<String, Value>>,
    /// Whether the map was ever borrowed to be changed. A map never changed
    /// is empty (or was handed in whole, which counts as changed) and owns
    /// no memory. One changed may own a node even when it is empty again:
    /// a `BTreeMap` whose last entry is removed keeps its root leaf, and
    /// only its drop frees it.
    written: bool,
}

impl Extra {
    pub fn new() -> Self {
        Extra::default()
    }

    /// The map, taken out.
    pub fn into_map(mut self) -> Map<String, Value> {
        std::mem::take(&mut *self.map)
    }
}

impl Drop for Extra {
    fn drop(&mut self) {
        if self.written {
            drop(std::mem::take(&mut *self.map));
        }
    }
}

impl Deref for Extra {
    type Target = Map<String, Value>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl DerefMut for Extra {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.written = true;
        &mut self.map
    }
}

impl PartialEq for Extra {
    fn eq(&self, other: &Self) -> bool {
        *self.map == *other.map
    }
}

impl std::fmt::Debug for Extra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.map.fmt(f)
    }
}

impl From<Map<String, Value>> for Extra {
    fn from(map: Map<String, Value>) -> Self {
        Extra {
            map: ManuallyDrop::new(map),
            written: true,
        }
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
        self.map.iter()
    }
}

impl<'a> IntoIterator for &'a mut Extra {
    type Item = (&'a String, &'a mut Value);
    type IntoIter = serde_json::map::IterMut<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

impl Extend<(String, Value)> for Extra {
    fn extend<I: IntoIterator<Item = (String, Value)>>(&mut self, iter: I) {
        self.deref_mut().extend(iter);
    }
}

impl Serialize for Extra {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.map.serialize(serializer)
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

    #[test]
    fn a_map_written_to_is_dropped_even_when_empty_again() {
        // Read only: never written, nothing to free.
        let read = Extra::new();
        assert!(read.get("a").is_none() && read.is_empty());
        assert!(!read.written);
        // A BTreeMap whose last entry is removed keeps its root leaf: the
        // map must still be dropped, or the leaf leaks.
        let mut emptied = Extra::new();
        emptied.insert("a".into(), Value::Null);
        emptied.remove("a");
        assert!(emptied.is_empty() && emptied.written);
        // Handed in whole: it may own memory whatever its length.
        assert!(Extra::from(Map::new()).written);
        // Equality is the maps', whatever was written.
        assert_eq!(emptied, read);
    }
}
