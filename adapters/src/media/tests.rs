use base64::Engine as _;
use serde_json::json;

use super::*;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn png(width: u32, height: u32) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    bytes.extend(width.to_be_bytes());
    bytes.extend(height.to_be_bytes());
    bytes.extend([8, 6, 0, 0, 0, 0, 0, 0, 0]);
    bytes
}

fn jpeg(width: u16, height: u16) -> Vec<u8> {
    let mut bytes = vec![0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10];
    bytes.extend(b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0");
    bytes.extend([0xff, 0xc0, 0x00, 0x11, 0x08]);
    bytes.extend(height.to_be_bytes());
    bytes.extend(width.to_be_bytes());
    bytes.extend([3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
    bytes
}

fn wav(seconds: u32) -> Vec<u8> {
    let rate = 16_000u32;
    let data = rate * 2 * seconds;
    let mut bytes = b"RIFF".to_vec();
    bytes.extend((36 + data).to_le_bytes());
    bytes.extend(b"WAVEfmt ");
    bytes.extend(16u32.to_le_bytes());
    bytes.extend(1u16.to_le_bytes()); // PCM
    bytes.extend(1u16.to_le_bytes()); // mono
    bytes.extend(rate.to_le_bytes());
    bytes.extend((rate * 2).to_le_bytes());
    bytes.extend(2u16.to_le_bytes());
    bytes.extend(16u16.to_le_bytes());
    bytes.extend(b"data");
    bytes.extend(data.to_le_bytes());
    bytes.extend(std::iter::repeat_n(0u8, data as usize));
    bytes
}

fn image_part(url: &str, detail: Option<&str>) -> ContentPart {
    let mut part = ContentPart::image_url(url);
    if let Some(detail) = detail {
        part.extra
            .insert("image_url".into(), json!({"url": url, "detail": detail}));
    }
    part
}

#[test]
fn image_dimensions_are_read_from_each_format() {
    assert_eq!(dimensions(&png(1024, 768)), Some((1024, 768)));
    assert_eq!(dimensions(&jpeg(640, 480)), Some((640, 480)));
    assert_eq!(dimensions(b"GIF89a\x40\x01\xf0\x00"), Some((320, 240)));
    assert_eq!(dimensions(b"not an image"), None);
    assert_eq!(dimensions(&png(0, 10)), None);
}

#[test]
fn images_follow_the_published_rules() {
    // OpenAI: 1024x1024 becomes 768x768, four tiles: 765. Anthropic:
    // 1024 x 1024 / 750 = 1399. The larger is reserved.
    assert_eq!(openai_tiles(1024, 1024), 765);
    assert_eq!(anthropic_pixels(1024, 1024), 1399);
    // 2048x4096: OpenAI 768x1536, six tiles; Anthropic 784x1568.
    assert_eq!(openai_tiles(2048, 4096), 1105);
    assert_eq!(anthropic_pixels(2048, 4096), 1640);
    let url = format!("data:image/png;base64,{}", b64(&png(1024, 1024)));
    assert_eq!(part_tokens(&image_part(&url, None)), Some(1399));
    let small = format!("data:image/jpeg;base64,{}", b64(&jpeg(200, 100)));
    assert_eq!(part_tokens(&image_part(&small, Some("low"))), Some(85));
}

#[test]
fn what_cannot_be_sized_says_so() {
    assert_eq!(
        part_tokens(&image_part("https://example.com/cat.png", None)),
        None
    );
    assert_eq!(
        part_tokens(&image_part("data:image/png;base64,!!!", None)),
        None
    );
    let mut file = ContentPart::image_url("x");
    file.kind = "file".into();
    file.extra.clear();
    file.extra
        .insert("file".into(), json!({"file_id": "file-abc"}));
    assert_eq!(part_tokens(&file), None);
    let mut odd = ContentPart::image_url("x");
    odd.kind = "video_url".into();
    assert_eq!(part_tokens(&odd), None);
}

#[test]
fn audio_is_sized_by_its_duration_and_pdfs_by_their_pages() {
    let mut audio = ContentPart::image_url("x");
    audio.kind = "input_audio".into();
    audio.extra.clear();
    audio.extra.insert(
        "input_audio".into(),
        json!({"data": b64(&wav(3)), "format": "wav"}),
    );
    assert_eq!(part_tokens(&audio), Some(30));
    // 4,000 bytes of MP3 at 32 kbit/s at most: one second, ten tokens.
    audio.extra.insert(
        "input_audio".into(),
        json!({"data": b64(&[0u8; 4000]), "format": "mp3"}),
    );
    assert_eq!(part_tokens(&audio), Some(10));
    let pdf = b"%PDF-1.4\n1 0 obj <</Type /Pages /Count 2>>\n2 0 obj <</Type /Page>>\n3 0 obj <</Type/Page>>\n%%EOF";
    let mut file = ContentPart::image_url("x");
    file.kind = "file".into();
    file.extra.clear();
    file.extra.insert(
        "file".into(),
        json!({"filename": "a.pdf", "file_data": format!("data:application/pdf;base64,{}", b64(pdf))}),
    );
    assert_eq!(part_tokens(&file), Some(6_000));
}

#[test]
fn a_chat_request_adds_its_parts_up() {
    let url = format!("data:image/png;base64,{}", b64(&png(1024, 1024)));
    let req: ChatRequest = serde_json::from_value(json!({
        "model": "m",
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "image_url", "image_url": {"url": url}},
        ]}],
    }))
    .unwrap();
    assert_eq!(
        chat_media(&req),
        MediaTokens {
            tokens: 2798,
            unknown_size: false
        }
    );
}

#[test]
fn no_input_makes_the_parsers_panic() {
    for bytes in [
        &b""[..],
        b"\xff\xd8",
        b"\xff\xd8\xff\xc0",
        b"RIFF\0\0\0\0WEBPVP8X",
        b"RIFF\0\0\0\0WAVEfmt \xff\xff\xff\xff",
    ] {
        let _ = dimensions(bytes);
        let _ = wav_seconds(bytes);
        let _ = pdf_pages(bytes);
    }
}
