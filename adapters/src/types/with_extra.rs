//! `Deserialize` for structs that keep unmodelled fields in `extra`, without
//! `#[serde(flatten)]`. Flatten makes serde read the whole object into its
//! generic `Content` tree first (every key and value allocated), then
//! deserialize the fields from that copy (on a short chat answer, decoding
//! took 2.17 us that way and 1.86 us with this; `--bench hot_paths`).
//! `with_extra!` writes the visitor: known fields straight into their types,
//! everything else into `extra`, with serde's own messages for missing and
//! duplicate fields.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, Visitor};

/// An object key, borrowed from the input when it has no escapes.
pub(crate) struct Key<'de>(pub Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

/// `with_extra!(Type { field = "json name": kind, ... })`, where `kind` is
/// `required`, `optional` (absent means `Default::default()`, as
/// `#[serde(default)]`) or `or(expression)` (absent means the expression).
/// Fields listed after `skip:` are never read (`#[serde(skip)]`) and start
/// as their default. After `; sent: flag = a, b` (as many as needed), the
/// struct's `bool` field `flag` says whether the input had every one of the
/// fields `a` and `b`, even as `null` (which their defaults cannot tell).
/// The struct's `extra` field takes every other key.
macro_rules! with_extra {
    ($ty:ident { $($field:ident = $json:literal : $kind:ident $(($default:expr))?),* $(,)? } $(skip: $($skipped:ident),*)? $(; sent: $flag:ident = $($sent:ident),+)*) => {
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct FieldsVisitor;
                impl<'de> serde::de::Visitor<'de> for FieldsVisitor {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("struct ", stringify!($ty)))
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<$ty, A::Error> {
                        $(let mut $field = None;)*
                        let mut extra = $crate::types::Extra::new();
                        while let Some($crate::types::with_extra::Key(key)) = map.next_key()? {
                            $(if key == $json {
                                if $field.is_some() {
                                    return Err(<A::Error as serde::de::Error>::duplicate_field($json));
                                }
                                $field = Some(map.next_value()?);
                                continue;
                            })*
                            extra.insert(key.into_owned(), map.next_value()?);
                        }
                        $(let $flag = true $(&& $sent.is_some())+;)*
                        Ok($ty {
                            $($field: with_extra!(@take $field, $json, $kind $(($default))?),)*
                            extra,
                            $($($skipped: Default::default(),)*)?
                            $($flag,)*
                        })
                    }
                }
                deserializer.deserialize_map(FieldsVisitor)
            }
        }
    };
    (@take $value:ident, $json:literal, required) => {
        match $value {
            Some(value) => value,
            None => return Err(<A::Error as serde::de::Error>::missing_field($json)),
        }
    };
    (@take $value:ident, $json:literal, optional) => {
        $value.unwrap_or_default()
    };
    (@take $value:ident, $json:literal, or($default:expr)) => {
        $value.unwrap_or_else(|| $default)
    };
}

pub(crate) use with_extra;
