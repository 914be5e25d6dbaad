//! `Extra`: the fields a type does not model, kept as they came.
//!
//! Almost always there are none: every message, choice, usage and answer
//! carries an `Extra`, about 16 a request for a whole chat answer. As a
//! `serde_json::Map` (a `BTreeMap`, 24 bytes) each was moved with its
//! holder, and dropping one that is empty still builds its consuming
//! iterator and walks it, about 60 instructions. `Extra` holds its map
//! boxed and only once something is written to it: 8 bytes, and nothing
//! to drop when there never were fields.

use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// An object's unmodelled fields; a `serde_json::Map` through `Deref`.
#[derive(Clone, Default)]
pub struct Extra(Option<Box<Map<String, Value>>>);

/// What an `Extra` with no map reads as.
fn no_fields() -> &'static Map<String, Value> {
    static EMPTY: OnceLock<Map<String, Value>> = OnceLock::new();
    EMPTY.get_or_init(Map::new)
}

impl Extra {
    pub fn new() -> Self {
        Extra(None)
    }

    /// The map to change, when it has fields: code that only edits or
    /// removes what is there need not make one.
    pub fn if_any(&mut self) -> Option<&mut Map<String, Value>> {
        self.0.as_deref_mut().filter(|map| !map.is_empty())
    }

    /// The map, taken out.
    pub fn into_map(self) -> Map<String, Value> {
        self.0.map(|map| *map).unwrap_or_default()
    }
}

impl Deref for Extra {
    type Target = Map<String, Value>;
    fn deref(&self) -> &Self::Target {
        match &self.0 {
            Some(map) => map,
            None => no_fields(),
        }
    }
}

/// Every change goes through here: the map is made on the first.
impl DerefMut for Extra {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.0.get_or_insert_with(Box::default)
    }
}

impl PartialEq for Extra {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for Extra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl From<Map<String, Value>> for Extra {
    fn from(map: Map<String, Value>) -> Self {
        Extra((!map.is_empty()).then(|| Box::new(map)))
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
        (**self).iter()
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
        (**self).serialize(serializer)
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
    fn no_map_is_made_until_something_is_written() {
        let read = Extra::new();
        assert!(read.get("a").is_none() && read.is_empty());
        assert!(read.0.is_none());
        assert!(Extra::from(Map::new()).0.is_none());
        let mut written = Extra::new();
        written.insert("a".into(), Value::Null);
        written.remove("a");
        // Emptied again, it still has its map, and equals one that never had.
        assert!(written.0.is_some());
        assert_eq!(written, read);
        assert_eq!(std::mem::size_of::<Extra>(), 8);
    }
}
