#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| switchyard_fuzz::targets::count_tokens_body(data));
