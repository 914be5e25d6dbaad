//! Whole numbers written as decimal digits without `fmt`'s machinery
//! (`core::fmt::write` and the integer's `Display`), which costs a few
//! hundred instructions a number on a request's path.

/// Room for the digits of any `u64`.
pub const MAX_DIGITS: usize = 20;

/// `value`'s decimal digits, written into the end of `buffer`.
pub fn digits(buffer: &mut [u8; MAX_DIGITS], mut value: u64) -> &[u8] {
    let mut at = buffer.len();
    loop {
        at -= 1;
        buffer[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    &buffer[at..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_read_as_display_writes_them() {
        let mut buffer = [0; MAX_DIGITS];
        for n in [0, 1, 9, 10, 99, 100, 4096, 1_000_000_000, u64::MAX] {
            assert_eq!(digits(&mut buffer, n), n.to_string().as_bytes());
        }
    }
}
