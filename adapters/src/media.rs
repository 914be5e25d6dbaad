//! Prompt tokens of the parts that are not text: images, audio and files.
//!
//! Budget reservations, the context-window check and the count used when a
//! client leaves before usage arrives all start from a prompt estimate; a
//! part counted as zero lets ten image requests through a budget that holds
//! one. Each kind is estimated by its provider's published rule:
//! - images: OpenAI's tiles (`detail: low` 85 tokens; otherwise fit within
//!   2048x2048, shortest side to 768, then 170 per 512-pixel tile plus 85)
//!   and Anthropic's pixels (long side at most 1568, then width x height /
//!   750); the larger of the two, since the backend is not yet chosen;
//! - audio: by duration, one token per 100 ms (OpenAI's rule for audio
//!   input); WAV's from its header, MP3's at its lowest bitrate, 32 kbit/s,
//!   which can only overstate it;
//! - files (PDF): 3,000 tokens a page, the top of Anthropic's published
//!   1,500 to 3,000 (each page goes in as text and as an image).
//!
//! A part whose size cannot be known before the call (an image by URL, a
//! `file_id`, an unknown format or kind) is marked unknown_size: reservations
//! then take the most the backend's context window allows.

use base64::Engine as _;
use serde_json::Value;

use crate::types::{ChatRequest, Content, ContentPart};

/// Tokens for each kind of part.
const OPENAI_LOW_DETAIL: u64 = 85;
const OPENAI_TILE: u64 = 170;
const ANTHROPIC_PIXELS_PER_TOKEN: u64 = 750;
const ANTHROPIC_LONG_EDGE: u64 = 1568;
const AUDIO_TOKENS_PER_S: f64 = 10.0;
const MP3_LOWEST_BITS_PER_S: f64 = 32_000.0;
const PDF_TOKENS_PER_PAGE: u64 = 3_000;
/// Bytes decoded from a data URL to find an image's dimensions: enough for
/// any header (JPEG's frame header can follow large EXIF blocks).
const HEADER_BYTES: usize = 256 * 1024;

/// The media parts of a prompt, as tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MediaTokens {
    /// Tokens of the parts that could be sized.
    pub tokens: u64,
    /// Some part could not be sized before the call.
    pub unknown_size: bool,
}

impl MediaTokens {
    fn add(&mut self, part: Option<u64>) {
        match part {
            Some(tokens) => self.tokens = self.tokens.saturating_add(tokens),
            None => self.unknown_size = true,
        }
    }
}

/// The media tokens of a chat request's messages.
pub fn chat_media(req: &ChatRequest) -> MediaTokens {
    let mut media = MediaTokens::default();
    for message in &req.messages {
        if let Some(Content::Parts(parts)) = &message.content {
            for part in parts {
                if part.kind != "text" {
                    media.add(part_tokens(part));
                }
            }
        }
    }
    media
}

/// One non-text part's tokens; `None` when it cannot be sized.
pub fn part_tokens(part: &ContentPart) -> Option<u64> {
    match part.kind.as_str() {
        "image_url" => {
            let image = part.extra.get("image_url")?;
            let (url, detail) = match image {
                Value::String(url) => (url.as_str(), None),
                other => (
                    other.get("url")?.as_str()?,
                    other.get("detail").and_then(Value::as_str),
                ),
            };
            image_tokens(url, detail)
        }
        "input_audio" => {
            let audio = part.extra.get("input_audio")?;
            let data = decode(audio.get("data")?.as_str()?, usize::MAX)?;
            let seconds = match audio.get("format").and_then(Value::as_str)? {
                "wav" => wav_seconds(&data)?,
                "mp3" => data.len() as f64 * 8.0 / MP3_LOWEST_BITS_PER_S,
                _ => return None,
            };
            Some((seconds * AUDIO_TOKENS_PER_S).ceil() as u64)
        }
        "file" => {
            let file = part.extra.get("file")?;
            let data = file.get("file_data")?.as_str()?;
            let data = data.split_once(";base64,").map_or(data, |(_, d)| d);
            let bytes = decode(data, usize::MAX)?;
            let pages = pdf_pages(&bytes)?;
            Some(pages * PDF_TOKENS_PER_PAGE)
        }
        _ => None,
    }
}

/// An image's tokens from its URL: only a `data:` URL can be sized here.
fn image_tokens(url: &str, detail: Option<&str>) -> Option<u64> {
    let data = url.strip_prefix("data:")?.split_once(";base64,")?.1;
    let (width, height) = dimensions(&decode(data, HEADER_BYTES)?)?;
    let openai = match detail {
        Some("low") => OPENAI_LOW_DETAIL,
        _ => openai_tiles(width, height),
    };
    Some(openai.max(anthropic_pixels(width, height)))
}

/// OpenAI's rule for `detail: high` (and `auto`, which may pick it).
fn openai_tiles(width: u64, height: u64) -> u64 {
    let (mut w, mut h) = (width as f64, height as f64);
    let fit = (2048.0 / w.max(h)).min(1.0);
    (w, h) = (w * fit, h * fit);
    let shortest = (768.0 / w.min(h)).min(1.0);
    (w, h) = (w * shortest, h * shortest);
    let tiles = (w / 512.0).ceil() as u64 * (h / 512.0).ceil() as u64;
    OPENAI_TILE * tiles + OPENAI_LOW_DETAIL
}

/// Anthropic's rule: width x height / 750, after a resize to a long edge
/// of at most 1568 pixels.
fn anthropic_pixels(width: u64, height: u64) -> u64 {
    let long = width.max(height).max(1);
    let (w, h) = if long > ANTHROPIC_LONG_EDGE {
        (
            width * ANTHROPIC_LONG_EDGE / long,
            height * ANTHROPIC_LONG_EDGE / long,
        )
    } else {
        (width, height)
    };
    (w * h).div_ceil(ANTHROPIC_PIXELS_PER_TOKEN)
}

/// Base64 text decoded, at most about `limit` bytes of it (from the start).
fn decode(data: &str, limit: usize) -> Option<Vec<u8>> {
    let take = limit.saturating_mul(4) / 3;
    let text = if data.len() > take {
        // Whole 4-character groups only.
        &data[..take - take % 4]
    } else {
        data
    };
    base64::engine::general_purpose::STANDARD
        .decode(text.trim_end())
        .ok()
}

/// Width and height of a PNG, GIF, JPEG or WebP image from its first bytes.
pub fn dimensions(bytes: &[u8]) -> Option<(u64, u64)> {
    let be32 = |at: usize| {
        Some(u64::from(u32::from_be_bytes(
            bytes.get(at..at + 4)?.try_into().ok()?,
        )))
    };
    let le16 = |at: usize| {
        Some(u64::from(u16::from_le_bytes(
            bytes.get(at..at + 2)?.try_into().ok()?,
        )))
    };
    let le24 = |at: usize| {
        let b = bytes.get(at..at + 3)?;
        Some(u64::from(b[0]) | u64::from(b[1]) << 8 | u64::from(b[2]) << 16)
    };
    let size = if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        (be32(16)?, be32(20)?)
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        (le16(6)?, le16(8)?)
    } else if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        match bytes.get(12..16)? {
            b"VP8 " => (le16(26)? & 0x3fff, le16(28)? & 0x3fff),
            b"VP8L" => {
                let b = bytes.get(21..25)?;
                let bits = u32::from_le_bytes(b.try_into().ok()?);
                (
                    u64::from(bits & 0x3fff) + 1,
                    u64::from((bits >> 14) & 0x3fff) + 1,
                )
            }
            b"VP8X" => (le24(24)? + 1, le24(27)? + 1),
            _ => return None,
        }
    } else if bytes.starts_with(&[0xff, 0xd8]) {
        jpeg_dimensions(bytes)?
    } else {
        return None;
    };
    (size.0 > 0 && size.1 > 0).then_some(size)
}

/// A JPEG's size from its first start-of-frame marker.
fn jpeg_dimensions(bytes: &[u8]) -> Option<(u64, u64)> {
    let mut at = 2;
    loop {
        // Markers may be padded with 0xff bytes.
        while *bytes.get(at)? == 0xff && *bytes.get(at + 1)? == 0xff {
            at += 1;
        }
        if *bytes.get(at)? != 0xff {
            return None;
        }
        let marker = *bytes.get(at + 1)?;
        let length = usize::from(u16::from_be_bytes(
            bytes.get(at + 2..at + 4)?.try_into().ok()?,
        ));
        // SOF0..SOF15 but DHT (c4), JPG (c8) and DAC (cc).
        if (0xc0..=0xcf).contains(&marker) && !matches!(marker, 0xc4 | 0xc8 | 0xcc) {
            let h = u16::from_be_bytes(bytes.get(at + 5..at + 7)?.try_into().ok()?);
            let w = u16::from_be_bytes(bytes.get(at + 7..at + 9)?.try_into().ok()?);
            return Some((u64::from(w), u64::from(h)));
        }
        at = at.checked_add(2 + length)?;
    }
}

/// A WAV file's duration from its `fmt ` byte rate and `data` size.
fn wav_seconds(bytes: &[u8]) -> Option<f64> {
    if !bytes.starts_with(b"RIFF") || bytes.get(8..12)? != b"WAVE" {
        return None;
    }
    let (mut at, mut byte_rate, mut data) = (12usize, None, None);
    while let Some(id) = bytes.get(at..at + 4) {
        let size = u32::from_le_bytes(bytes.get(at + 4..at + 8)?.try_into().ok()?) as usize;
        match id {
            b"fmt " => {
                byte_rate = Some(u32::from_le_bytes(
                    bytes.get(at + 16..at + 20)?.try_into().ok()?,
                ));
            }
            // The data chunk's size as declared, or what is there.
            b"data" => data = Some(size.min(bytes.len().saturating_sub(at + 8))),
            _ => {}
        }
        at = at.checked_add(8 + size + size % 2)?;
    }
    let byte_rate = f64::from(byte_rate.filter(|r| *r > 0)?);
    Some(data? as f64 / byte_rate)
}

/// Pages of a PDF: its page objects (`/Type /Page`, not `/Pages`).
fn pdf_pages(bytes: &[u8]) -> Option<u64> {
    if !bytes.starts_with(b"%PDF") {
        return None;
    }
    let mut pages = 0;
    for (i, window) in bytes.windows(5).enumerate() {
        if window == b"/Page" && bytes.get(i + 5) != Some(&b's') {
            // `/Type /Page` or `/Type/Page`; `/Pages` is the tree.
            let before = &bytes[i.saturating_sub(7)..i];
            if before.ends_with(b"/Type ") || before.ends_with(b"/Type") {
                pages += 1;
            }
        }
    }
    (pages > 0).then_some(pages)
}

#[cfg(test)]
mod tests;
