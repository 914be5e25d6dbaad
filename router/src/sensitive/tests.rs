//! Each detector on values it must find, and on look-alikes it must not.

use super::*;

fn kinds(text: &str) -> Vec<(Kind, &str)> {
    scan(text)
        .into_iter()
        .map(|f| (f.kind, &text[f.start..f.end]))
        .collect()
}

#[test]
fn cards_pass_luhn_and_an_issuers_prefix() {
    for card in [
        "4111 1111 1111 1111",
        "5500-0000-0000-0004",
        "378282246310005",
        "6011111111111117",
    ] {
        assert_eq!(
            kinds(&format!("pay with {card} today")),
            [(Kind::Card, card)],
            "{card}"
        );
    }
    // Luhn-valid, but no issuer's: a timestamp, an order number.
    for not_card in [
        "1796256000000",
        "order 1234567812345670",
        "4111 1111 1111 1112",
    ] {
        assert!(
            kinds(not_card).iter().all(|(k, _)| *k != Kind::Card),
            "{not_card}"
        );
    }
}

#[test]
fn ibans_pass_mod_97() {
    for iban in [
        "GB82 WEST 1234 5698 7654 32",
        "DE89370400440532013000",
        "FR1420041010050500013M02606",
    ] {
        assert_eq!(
            kinds(&format!("IBAN: {iban}.")),
            [(Kind::Iban, iban)],
            "{iban}"
        );
    }
    assert!(kinds("GB82 WEST 1234 5698 7654 33").is_empty());
}

#[test]
fn emails_phones_ids_and_addresses() {
    assert_eq!(
        kinds("write to jane.doe+x@example.co.uk"),
        [(Kind::Email, "jane.doe+x@example.co.uk")]
    );
    assert_eq!(
        kinds("call +44 20 7946 0958 now"),
        [(Kind::Phone, "+44 20 7946 0958")]
    );
    assert_eq!(
        kinds("call (415) 555-2671"),
        [(Kind::Phone, "(415) 555-2671")]
    );
    assert_eq!(
        kinds("SSN 123-45-6789"),
        [(Kind::NationalId, "123-45-6789")]
    );
    // Never issued: area 000, 666, 9xx.
    assert!(kinds("000-12-3456 666-12-3456 912-34-5678").is_empty());
    assert_eq!(
        kinds("NINO AB 12 34 56 C"),
        [(Kind::NationalId, "AB 12 34 56 C")]
    );
    assert_eq!(kinds("from 192.168.10.4:80"), [(Kind::Ip, "192.168.10.4")]);
    assert_eq!(
        kinds("host 2001:db8::8a2e:370:7334"),
        [(Kind::Ip, "2001:db8::8a2e:370:7334")]
    );
    assert!(kinds("version 1.2.300.4 at 12:30:45").is_empty());
}

#[test]
fn credentials_and_private_keys() {
    let aws = "AKIAIOSFODNN7EXAMPLE";
    assert_eq!(kinds(&format!("key={aws}")), [(Kind::Credential, aws)]);
    let openai = "sk-proj-AbCdEf0123456789GhIjKl";
    assert_eq!(kinds(openai), [(Kind::Credential, openai)]);
    let github = "ghp_k3Jd9Lq2Xv8Rt5Wz1Mn7Bc4Hf6Gy0Ps2Ae9Ui".to_owned();
    assert_eq!(kinds(&github), [(Kind::Credential, github.as_str())]);
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    assert_eq!(kinds(jwt), [(Kind::Credential, jwt)]);
    let random = "Zx8Qp2Lm7Vt4Rk9Wn3Jc6Hs1Fd5Gb0Ya";
    assert_eq!(
        kinds(&format!("token {random} end")),
        [(Kind::Credential, random)]
    );
    let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n-----END RSA PRIVATE KEY-----";
    assert_eq!(kinds(&format!("here:\n{pem}\n")), [(Kind::PrivateKey, pem)]);
    // Not secrets: a UUID, a hex digest, a word run, a base64 blob.
    // Stand-ins a document shows in place of a key.
    for text in [
        "sk-xxxxxxxxxxxxxxxxxxxxxxxx",
        "xoxb-your-token-here",
        "-----BEGIN PRIVATE KEY-----\n(your key here)\n-----END PRIVATE KEY-----",
    ] {
        assert!(kinds(text).is_empty(), "{text}: {:?}", kinds(text));
    }
    let blob = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg".repeat(4);
    for text in [
        "id 123e4567-e89b-12d3-a456-426614174000",
        "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "the_quick_brown_fox_jumps_over_the_lazy_dog_again",
        blob.as_str(),
    ] {
        assert!(kinds(text).is_empty(), "{text}: {:?}", kinds(text));
    }
}

#[test]
fn look_alikes_are_folded_and_found_where_they_stand() {
    // Fullwidth digits, and a zero-width space inside the number.
    let text = "card ４１１１ １１１１ １１１１ \u{200B}１１１１ ok";
    let found = scan(text);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].kind, Kind::Card);
    assert!(text[found[0].start..found[0].end].starts_with('４'));
    assert!(text[found[0].start..found[0].end].ends_with('１'));
}

#[test]
fn a_huge_prompt_is_scanned_only_so_far() {
    let mut text = "word ".repeat(MAX_SCAN_BYTES / 5 + 10);
    text.push_str("jane@example.com");
    assert!(scan(&text).is_empty());
    assert_eq!(Kind::from_name("national_id"), Some(Kind::NationalId));
    assert_eq!(Kind::ALL.map(Kind::as_str).len(), 8);
}

#[test]
fn neighbours_are_each_found() {
    // One character between values: the bound of one is the bound of the
    // next.
    let ips: Vec<&str> = kinds("10.0.0.1\n10.0.0.2\n10.0.0.3")
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(ips, ["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
    let env = "A=Zx8Qp2Lm7Vt4Rk9Wn3Jc6Hs1Fd5Gb0Ya\nB=Qw7Er5Ty3Ui1Op9As8Df6Gh4Jk2Lz0Xc";
    assert_eq!(kinds(env).len(), 2, "{:?}", kinds(env));
    // A quantity before a card, an expiry after it.
    assert_eq!(
        kinds("qty 2 4111 1111 1111 1111 exp 09 27"),
        [(Kind::Card, "4111 1111 1111 1111")]
    );
    assert_eq!(
        kinds("card 4111 1111 1111 1111 09 27"),
        [(Kind::Card, "4111 1111 1111 1111")]
    );
}

#[test]
fn many_findings_are_each_found() {
    // A hundred thousand addresses: each overlap check is one lookup, so
    // this is a pass over the text, not minutes of comparisons.
    let text = "a@example.com ".repeat(100_000);
    assert_eq!(scan(&text).len(), 100_000);
}
