//! Link-time choices for the `buddy` binary (nothing is generated).
//!
//! Relative relocations are packed (DT_RELR): the binary's ~20,000 of them
//! take 5 KiB instead of 500 KiB that the loader reads on every start, about
//! 1 MiB less resident memory for `buddy exec` (docs/PERFORMANCE.md). The
//! loader must understand the format, which glibc does from 2.36 on, so the
//! flag is passed only when building on such a glibc for this same machine
//! type; anywhere else the binary links as before.
//!
//! The functions that run at start-up are packed together at the front of
//! the code (build/startup.ld, made by scripts/startup-order). They were
//! spread over the whole 13 MB of code, and the kernel maps the code around
//! every page it faults in, so a plain `buddy exec` had 10 MB of the binary
//! resident; packed, about 3 MB (docs/PERFORMANCE.md, "Start-up code
//! layout"). The file only orders input sections by name patterns, which
//! GNU ld and lld both read; names it does not find are skipped.
//!
//! The unwinder is linked in (libgcc_eh.a) instead of loaded as
//! libgcc_s.so.1. The shared library costs every start its mapping, its
//! symbol lookups and a constructor that asks the CPU for its features with
//! a dozen `cpuid` instructions, which trap to the hypervisor in a virtual
//! machine (4-5 µs each here): `--version` 1.32 -> 1.22 ms at the median
//! (docs/PERFORMANCE.md). std names `gcc_s` itself, after every crate; a
//! static `gcc_eh` named by this crate comes first on the link line, so it
//! defines the `_Unwind_*` functions and `--as-needed` drops `gcc_s`. Only
//! for a native glibc build whose compiler has the archive (any gcc
//! install); elsewhere the binary links as before.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/startup.ld");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target.contains("-linux-") {
        let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
        let script = std::path::Path::new(&dir).join("build/startup.ld");
        if script.is_file() {
            println!("cargo:rustc-link-arg-bins=-Wl,-T,{}", script.display());
        }
    }
    if target == host && target.ends_with("-linux-gnu") && glibc_at_least(2, 36) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    let crt_static = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .unwrap_or_default()
        .split(',')
        .any(|f| f == "crt-static");
    if target == host && target.ends_with("-linux-gnu") && !crt_static {
        if let Some(dir) = compiler_file_dir("libgcc_eh.a") {
            println!("cargo:rustc-link-search=native={}", dir.display());
            // Not bundled into the rlib: named on the final link only.
            println!("cargo:rustc-link-lib=static:-bundle=gcc_eh");
        }
    }
}

/// The directory of `name` among the C compiler's own libraries, from `cc
/// -print-file-name` (the linker rustc runs on Linux), when it is there.
fn compiler_file_dir(name: &str) -> Option<std::path::PathBuf> {
    let out = Command::new("cc")
        .arg(format!("-print-file-name={name}"))
        .output()
        .ok()?;
    let path = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    // Not found, gcc prints the bare name back.
    (path.is_absolute() && path.is_file()).then(|| path.parent().map(|p| p.to_path_buf()))?
}

/// The glibc this build runs on, from `getconf GNU_LIBC_VERSION` ("glibc 2.36").
fn glibc_at_least(major: u32, minor: u32) -> bool {
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(version) = text.trim().strip_prefix("glibc ") else {
        return false;
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(a), Some(b)) => (a, b) >= (major, minor),
        _ => false,
    }
}
