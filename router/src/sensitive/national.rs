//! National identity numbers whose form can be validated: the check
//! digits or letters each carries, or the ranges its issuer uses. A
//! number that fails is left alone, so an order number of the same length
//! is not taken for one.

/// A US social security number as issued: area not 000, 666 or 900-999,
/// group not 00, serial not 0000.
pub fn ssn_valid(text: &str) -> bool {
    let mut parts = text.split('-').map(|p| p.parse::<u32>().unwrap_or(0));
    let (Some(area), Some(group), Some(serial)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
}

/// A UK National Insurance number: its prefix letters as HMRC issues them
/// (neither D, F, I, Q, U or V, nor O second, nor BG, GB, NK, KN, TN, NT,
/// ZZ).
pub fn nino_valid(text: &str) -> bool {
    let bytes = text.as_bytes();
    let (first, second) = (bytes[0], bytes[1]);
    let never = |b: u8| b"DFIQUV".contains(&b);
    !never(first)
        && !never(second)
        && second != b'O'
        && !["BG", "GB", "NK", "KN", "TN", "NT", "ZZ"].contains(&&text[..2])
}

fn digits(text: &str) -> Vec<u32> {
    text.chars().filter_map(|c| c.to_digit(10)).collect()
}

/// Brazil's CPF: eleven digits, not all the same, the last two check
/// digits of the nine before (weights 10..2, then 11..2, mod 11).
pub fn cpf_valid(text: &str) -> bool {
    let d = digits(text);
    if d.len() != 11 || d.iter().all(|&x| x == d[0]) {
        return false;
    }
    let check = |n: usize| {
        let sum: u32 = (0..n).map(|i| d[i] * (n as u32 + 1 - i as u32)).sum();
        (sum * 10) % 11 % 10
    };
    check(9) == d[9] && check(10) == d[10]
}

/// Spain's DNI (eight digits) or NIE (X, Y or Z and seven digits): the
/// letter is the number mod 23 in the issuer's table.
pub fn dni_valid(text: &str) -> bool {
    const LETTERS: &[u8; 23] = b"TRWAGMYFPDXBNJZSQVHLCKE";
    let compact: Vec<u8> = text.bytes().filter(|b| *b != b'-').collect();
    let Some((&letter, number)) = compact.split_last() else {
        return false;
    };
    let mut value: u64 = 0;
    for (i, &b) in number.iter().enumerate() {
        let d = match (i, b) {
            (0, b'X') => 0,
            (0, b'Y') => 1,
            (0, b'Z') => 2,
            (_, b'0'..=b'9') => u64::from(b - b'0'),
            _ => return false,
        };
        value = value * 10 + d;
    }
    number.len() == 8 && LETTERS[(value % 23) as usize] == letter
}

/// Italy's codice fiscale: its sixteenth character is the check
/// character of the fifteen before (odd and even positions weighted by
/// the issuer's tables, mod 26).
pub fn codice_fiscale_valid(text: &str) -> bool {
    const ODD: [u32; 26] = [
        1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3, 6, 8, 12, 14, 16, 10, 22, 25, 24,
        23,
    ];
    let bytes = text.as_bytes();
    if bytes.len() != 16 {
        return false;
    }
    let mut sum = 0;
    for (i, &b) in bytes[..15].iter().enumerate() {
        // Digits stand for the letter of the same rank (0 for A).
        let rank = match b {
            b'0'..=b'9' => u32::from(b - b'0'),
            b'A'..=b'Z' => u32::from(b - b'A'),
            _ => return false,
        };
        // Positions count from one: the first is odd.
        sum += if i % 2 == 0 { ODD[rank as usize] } else { rank };
    }
    u32::from(bytes[15]) == u32::from(b'A') + sum % 26
}

/// France's social security number (NIR): sex, year, month, place (2A and
/// 2B for Corsica), commune, order, and a key of 97 less the first
/// thirteen digits' remainder mod 97.
pub fn insee_valid(text: &str) -> bool {
    let compact: String = text.chars().filter(|c| *c != ' ').collect();
    if compact.len() != 15 {
        return false;
    }
    // Corsica's departments count as 19 and 18 for the key.
    let numeric = compact.replacen("2A", "19", 1).replacen("2B", "18", 1);
    let (Ok(body), Ok(key)) = (numeric[..13].parse::<u64>(), numeric[13..].parse::<u64>()) else {
        return false;
    };
    // Months 20 to 42 and 50 and above stand in where the month was
    // unknown.
    let month = numeric[3..5].parse::<u32>().unwrap_or(0);
    let month_known = (1..=12).contains(&month) || (20..=42).contains(&month) || month >= 50;
    month_known && key == 97 - body % 97
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_digits_and_letters() {
        assert!(cpf_valid("529.982.247-25"));
        assert!(!cpf_valid("529.982.247-26"));
        assert!(!cpf_valid("111.111.111-11"));
        assert!(dni_valid("12345678Z"));
        assert!(dni_valid("X1234567L"));
        assert!(!dni_valid("12345678A"));
        assert!(codice_fiscale_valid("RSSMRA85T10A562S"));
        assert!(!codice_fiscale_valid("RSSMRA85T10A562T"));
        assert!(insee_valid("1 84 12 76 451 089 46"));
        assert!(!insee_valid("1 84 12 76 451 089 47"));
        assert!(nino_valid("AB 12 34 56 C"));
        assert!(!nino_valid("GB 12 34 56 C") && !nino_valid("DA 12 34 56 C"));
    }
}
