//! Look-alikes folded before a scan: fullwidth forms (`４１１１`, `ｅｍａｉｌ`)
//! become their ASCII letters and digits, spaces of other widths become a
//! space, and zero-width characters and soft hyphens, which can hide inside
//! a number or a key, are dropped. Offsets map back to the
//! text as given, so a finding (and a mask) covers what the caller sent.

/// The folded text, and for each of its bytes the offset of the character
/// it came from in the original.
pub struct Folded {
    pub text: String,
    origin: Vec<usize>,
    original_len: usize,
}

impl Folded {
    pub fn of(text: &str) -> Folded {
        let mut folded = String::with_capacity(text.len());
        let mut origin = Vec::with_capacity(text.len());
        for (at, c) in text.char_indices() {
            let c = match c {
                // Zero-width space, joiners, word joiner, byte-order mark,
                // soft hyphen.
                '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}' | '\u{AD}' => continue,
                // Spaces of other widths: no-break, ideographic, figure,
                // narrow no-break, thin.
                '\u{A0}' | '\u{3000}' | '\u{2007}' | '\u{202F}' | '\u{2009}' => ' ',
                // Fullwidth ASCII variants.
                '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFF01 + 0x21).unwrap_or(c),
                c => c,
            };
            folded.push(c);
            origin.extend(std::iter::repeat_n(at, c.len_utf8()));
        }
        Folded {
            text: folded,
            origin,
            original_len: text.len(),
        }
    }

    /// The original byte range of the folded range `start..end` (which
    /// ends on a character boundary): up to where the next folded
    /// character came from, or the end.
    pub fn original(&self, start: usize, end: usize) -> (usize, usize) {
        let at = |i: usize| self.origin.get(i).copied().unwrap_or(self.original_len);
        (at(start), at(end))
    }
}
