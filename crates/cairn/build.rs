//! Release builds of `cairn` for x86-64 Linux link the functions the daemon
//! runs from start-up until idle first in `.text`, in `startup.order`
//! (written by `scripts/startup-order.sh`), then those a burst of due runs
//! adds. The kernel maps code in 64 KB
//! chunks around each page a process touches, so start-up code scattered
//! over 16 MB of `.text` kept about 12 MB of it resident in an idle daemon;
//! laid out together, about 3 MB. Only where functions sit changes.
//!
//! `--symbol-ordering-file` is lld's (Rust's default linker for this target)
//! and mold's, not GNU ld's: a build that picks its own linker (`RUSTC_LINKER`,
//! `-fuse-ld`, `-C linker` in RUSTFLAGS) goes without, as does one with
//! `CAIRN_STARTUP_ORDER=0`. Names the file lists that the build lacks (after
//! a toolchain or dependency update) are passed over without a warning.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=startup.order");
    println!("cargo:rerun-if-env-changed=CAIRN_STARTUP_ORDER");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let rustflags = var("CARGO_ENCODED_RUSTFLAGS");
    let own_linker = std::env::var_os("RUSTC_LINKER").is_some()
        || rustflags.contains("fuse-ld")
        || rustflags.contains("linker");
    if var("PROFILE") != "release"
        || var("TARGET") != "x86_64-unknown-linux-gnu"
        || var("CAIRN_STARTUP_ORDER") == "0"
        || own_linker
    {
        return;
    }
    let order = Path::new(&var("CARGO_MANIFEST_DIR")).join("startup.order");
    #[expect(
        clippy::disallowed_methods,
        reason = "a build script runs outside any async runtime: blocking is its way"
    )]
    if !order.is_file() {
        return;
    }
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        order.display()
    );
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}
