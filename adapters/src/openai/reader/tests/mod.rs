//! The readers held to serde's results.

use std::fmt::Debug;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde::de::DeserializeOwned;

use super::{Cursor, string_stop};

mod answer;
mod chunk;
pub(crate) mod request;

/// `read` either declines `text` or reads exactly what serde reads.
fn agrees<T>(read: fn(&str) -> Option<T>, text: &str) -> Result<(), String>
where
    T: DeserializeOwned + PartialEq + Debug,
{
    match (read(text), serde_json::from_str::<T>(text)) {
        (None, _) => Ok(()),
        (Some(fast), Ok(slow)) if fast == slow => Ok(()),
        (Some(fast), Ok(slow)) => Err(format!("{text}\nread {fast:?}\nserde {slow:?}")),
        (Some(fast), Err(err)) => Err(format!("{text}\nread {fast:?}\nserde refused: {err}")),
    }
}

/// Each of `bodies` taken by `read` and read as serde reads it.
fn read_as_serde_does<T>(read: fn(&str) -> Option<T>, bodies: &[&str])
where
    T: DeserializeOwned + PartialEq + Debug,
{
    for text in bodies {
        let fast = read(text).unwrap_or_else(|| panic!("declined: {text}"));
        assert_eq!(fast, serde_json::from_str::<T>(text).unwrap(), "{text}");
    }
}

/// Each of `bodies` with one of its characters deleted, or one of a set of
/// characters inserted before it, declined by `read` or read as serde
/// reads it.
fn one_byte_changes_agree<T>(read: fn(&str) -> Option<T>, bodies: &[&str])
where
    T: DeserializeOwned + PartialEq + Debug,
{
    for text in bodies {
        for at in 0..text.len() {
            if !text.is_char_boundary(at) {
                continue;
            }
            let mut cut = text.to_string();
            cut.remove(at);
            agrees(read, &cut).unwrap();
            for put in [
                '"', '\\', ',', ':', '}', ']', '{', '[', '0', '9', ' ', 'n', 't', 'f', 'e', 'E',
                '\u{1}', '\u{b}', '-', '.',
            ] {
                let mut changed = text.to_string();
                changed.insert(at, put);
                agrees(read, &changed).unwrap();
            }
        }
    }
}

/// 4,000 bodies from `bodies`, each declined by `read` or read as serde
/// reads it; enough of them read by both for the comparison to mean
/// something.
fn generated_agree<T>(read: fn(&str) -> Option<T>, bodies: impl Strategy<Value = String>)
where
    T: DeserializeOwned + PartialEq + Debug,
{
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut read_fast, mut valid) = (0, 0);
    for _ in 0..4000 {
        let text = bodies.new_tree(&mut runner).unwrap().current();
        agrees(read, &text).unwrap();
        read_fast += usize::from(read(&text).is_some());
        valid += usize::from(serde_json::from_str::<T>(&text).is_ok());
    }
    assert!(read_fast > 200, "{read_fast} read fast, of {valid} valid");
}

/// JSON values of every kind, some of them not JSON.
fn any_value() -> BoxedStrategy<String> {
    prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        Just("nul".to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        Just("18446744073709551616".to_string()),
        Just("4294967296".to_string()),
        Just("-3".to_string()),
        Just("007".to_string()),
        Just("2.5".to_string()),
        Just("1e3".to_string()),
        text(),
        "[a-z\\\\\"nrtbfu0-9]{0,6}".prop_map(|s| format!("\"{s}\"")),
        Just("\"robot\"".to_string()),
        Just("{}".to_string()),
        Just("[]".to_string()),
        Just("{\"a\":1}".to_string()),
    ]
    .boxed()
}

/// A JSON string, with escapes now and then.
fn text() -> BoxedStrategy<String> {
    prop_oneof![
        24 => "[a-z é川—/]{0,8}",
        1 => "[a-z\\\\\"/\n\t\u{1}]{0,6}".prop_map(|s| s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n").replace('\t', "\\t")),
        1 => "[a-z\\\\\"]{0,6}",
        1 => Just("\\u00e9\\ud83d\\ude00".to_string()),
        1 => Just("\\ud800".to_string()),
    ]
    .prop_map(|s| format!("\"{s}\""))
    .boxed()
}

fn null() -> BoxedStrategy<String> {
    Just("null".to_string()).boxed()
}

fn unsigned() -> BoxedStrategy<String> {
    prop_oneof![
        (0u64..5).prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string())
    ]
    .boxed()
}

/// A member `"key": value`, whose value is mostly of the key's kind and
/// now and then anything.
fn member(key: &'static str, value: BoxedStrategy<String>) -> BoxedStrategy<String> {
    (prop_oneof![48 => value, 1 => any_value()], space(), space())
        .prop_map(move |(value, before, after)| {
            format!("{before}\"{key}\"{after}:{before}{value}{after}")
        })
        .boxed()
}

fn space() -> impl Strategy<Value = &'static str> {
    prop_oneof![60 => Just(""), 10 => Just(" "), 4 => Just("\n\t\r"), 1 => Just("\u{b}")]
}

/// An object of some of `members` (each kept three times in four), in any
/// order.
fn object(members: Vec<BoxedStrategy<String>>) -> BoxedStrategy<String> {
    let count = members.len();
    (
        members.prop_shuffle(),
        prop::collection::vec(0..4u8, count),
        prop_oneof![40 => Just(","), 1 => Just(",,")],
    )
        .prop_map(|(members, keep, comma)| {
            let kept: Vec<String> = members
                .into_iter()
                .zip(keep)
                .filter(|(_, keep)| *keep > 0)
                .map(|(member, _)| member)
                .collect();
            format!("{{{}}}", kept.join(comma))
        })
        .boxed()
}

proptest! {
    #[test]
    fn a_number_reads_to_the_bit_as_serde_reads_it(
        whole in "0|[1-9][0-9]{0,6}",
        places in "[0-9]{1,20}",
        exponent in prop::option::of("[eE][+-]?[0-9]{1,2}"),
    ) {
        let text = format!("{whole}.{places}{}", exponent.unwrap_or_default());
        let serde: serde_json::Value = serde_json::from_str(&text).unwrap();
        // As in a body: a delimiter after the value.
        let ours = Cursor { text: &format!("{text},"), at: 0 }.value().unwrap();
        prop_assert_eq!(ours.as_f64().map(f64::to_bits), serde.as_f64().map(f64::to_bits), "{}", text);
    }

    #[test]
    fn an_integer_reads_as_its_digits_say(digits in "[0-9]{1,25}", after in "[,}\\] .eE]") {
        let text = format!("{digits}{after}");
        let mut cursor = Cursor { text: &text, at: 0 };
        let expected = match digits.parse::<u64>() {
            // JSON writes no leading zeros, and a number followed by a
            // fraction or an exponent is not an integer.
            Ok(_) if digits.len() > 1 && digits.starts_with('0') => None,
            Ok(_) if matches!(after.as_str(), "." | "e" | "E") => None,
            Ok(n) => Some(n),
            Err(_) => None,
        };
        prop_assert_eq!(cursor.unsigned(), expected, "{}", text);
        if expected.is_some() {
            prop_assert_eq!(cursor.at, digits.len());
        }
    }

    #[test]
    fn a_string_stops_where_a_byte_by_byte_search_stops(
        bytes in prop::collection::vec(prop_oneof![Just(b'"'), Just(b'\\'), 0u8..0x22, 0x1fu8..=0xff, 0x7eu8..=0x81], 0..40)
    ) {
        let slow = bytes.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20);
        prop_assert_eq!(string_stop(&bytes), slow);
    }
}

/// A body of the members it must have (`required`, joined) and those of
/// `rest`, the required ones first or last, then a tail: mostly nothing,
/// now and then white space or what makes it no longer JSON.
fn body(required: BoxedStrategy<String>, rest: BoxedStrategy<String>) -> BoxedStrategy<String> {
    let tail = prop_oneof![8 => Just(""), 1 => Just(" \n"), 1 => Just("}"), 1 => Just(" x")];
    (required, rest, any::<bool>(), tail)
        .prop_map(|(required, rest, first, tail)| {
            let inner = &rest[1..rest.len() - 1];
            if inner.is_empty() {
                format!("{{{required}}}{tail}")
            } else if first {
                format!("{{{required},{inner}}}{tail}")
            } else {
                format!("{{{inner},{required}}}{tail}")
            }
        })
        .boxed()
}

/// Fractions as llama.cpp writes them, of up to 19 digits, are read by
/// hand, whether or not serde's way of reading them rounds exactly.
#[test]
fn fractions_of_up_to_19_digits_are_read_by_hand() {
    for text in [
        "1.856242",
        "0.5",
        "1.0008000000000001",
        "17.785786000000001",
        "0.30000000000000004",
    ] {
        let ours = Cursor { text, at: 0 }.fraction();
        assert_eq!(ours, serde_json::from_str::<f64>(text).ok(), "{text}");
        assert!(ours.is_some(), "{text}");
    }
    for text in ["1.5e3", "01.5", "1.", "12345678901.234567890", "1"] {
        assert_eq!(Cursor { text, at: 0 }.fraction(), None, "{text}");
    }
}
