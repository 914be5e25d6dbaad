//! Links the functions a proxied request runs side by side.
//!
//! `hot-symbols.txt` names them (1,575 names on 2026-12-06, about 1,100 of
//! them in any one build: the release and bench builds hash some generic
//! functions differently), as callgrind saw them run in the gateway;
//! `scripts/hot-symbols.sh` writes it. Given to lld as a symbol ordering
//! file, they are laid out together instead of across the whole binary, so
//! a request touches fewer pages of code. In the overhead benchmark
//! (`OVERHEAD_AB`, two runs of nine rounds each time) the same code linked
//! without the list took 1.07x and 1.10x the CPU per request at c=1, where
//! each request starts on cold caches, on 2026-11-30; linked with a list
//! gone stale, 1.02x and 1.04x at c=1 and level at c=16 and c=64 on
//! 2026-12-06, within the rounds' spread.
//!
//! Only for x86_64 Linux, where rustc links with its own lld by default
//! (since Rust 1.90), and not when another linker is configured through the
//! environment. Names the binary no longer has are skipped, so a list gone
//! stale after code changes costs nothing but the gain.

#![allow(clippy::print_stdout)] // a build script talks to cargo on stdout

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=hot-symbols.txt");
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER");
    let target = env::var("TARGET").unwrap_or_default();
    let rustflags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let other_linker = env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_some()
        || rustflags.contains("linker")
        || rustflags.contains("fuse-ld");
    if target != "x86_64-unknown-linux-gnu" || other_linker {
        return;
    }
    let Ok(dir) = env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    let list = Path::new(&dir).join("hot-symbols.txt");
    if !list.exists() {
        return;
    }
    // The link arguments name the list by its absolute path, so a target
    // folder shared by two checkouts (scripts/instructions-guard.sh keeps
    // one in the cache, and CI builds from a clone elsewhere) must run this
    // again when the path it gave is gone: by the relative path above alone,
    // cargo took the list as unchanged and linked with the other
    // checkout's path, which no longer existed.
    println!("cargo:rerun-if-changed={}", list.display());
    for args in ["bin=switchyard=", "benches="] {
        println!(
            "cargo:rustc-link-arg-{args}-Wl,--symbol-ordering-file={}",
            list.display()
        );
        println!("cargo:rustc-link-arg-{args}-Wl,--no-warn-symbol-ordering");
    }
}
