#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| switchyard_fuzz::targets::routed_body(data));
