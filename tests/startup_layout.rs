//! The binary's start-up code is packed at the front (build.rs passes
//! build/startup.ld to the linker). Without it a plain `buddy exec` keeps
//! three times as much of the binary resident; this guard fails when the
//! script stops reaching the linker or its patterns stop matching.
#![cfg(target_os = "linux")]

use std::convert::TryInto;

/// (name, size) of every section of a 64-bit little-endian ELF file.
fn sections(elf: &[u8]) -> Vec<(String, u64)> {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(elf[4], 2, "not a 64-bit ELF file");
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap());
    let shoff = u64_at(0x28) as usize;
    let shentsize = u16_at(0x3a);
    let shnum = u16_at(0x3c);
    let shstrndx = u16_at(0x3e);
    let header = |i: usize| shoff + i * shentsize;
    let names_at = u64_at(header(shstrndx) + 0x18) as usize;
    (0..shnum)
        .map(|i| {
            let h = header(i);
            let start = names_at + u32_at(h);
            let end = start + elf[start..].iter().position(|&b| b == 0).unwrap();
            let name = String::from_utf8_lossy(&elf[start..end]).into_owned();
            (name, u64_at(h + 0x20))
        })
        .collect()
}

#[test]
fn start_up_functions_are_packed_in_their_own_section() {
    let elf = std::fs::read(env!("CARGO_BIN_EXE_buddy")).unwrap();
    let all = sections(&elf);
    let size_of = |name: &str| all.iter().find(|(n, _)| n == name).map(|(_, s)| *s);
    let packed = size_of(".text.startup_order")
        .expect("no .text.startup_order section: build/startup.ld did not reach the linker");
    let text = size_of(".text").unwrap();
    // About a thousand functions, several hundred KiB; a handful left
    // means the patterns went stale (rerun scripts/startup-order).
    assert!(
        packed >= 256 * 1024,
        "only {packed} bytes of start-up code packed: rerun scripts/startup-order"
    );
    assert!(
        packed < text,
        "the packed part should be a small share of the code"
    );
}

/// build.rs links the unwinder in (libgcc_eh.a): libgcc_s.so.1 cost every
/// start its mapping, its symbol lookups and a constructor that runs a
/// dozen `cpuid` instructions, each a trap to the hypervisor in a VM. The
/// loader lists what it would load without running the program
/// (`LD_TRACE_LOADED_OBJECTS`, what `ldd` does).
#[test]
fn the_unwinder_is_linked_in_not_loaded() {
    let archive = std::process::Command::new("cc")
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    if !cfg!(target_env = "gnu") || !std::path::Path::new(&archive).is_absolute() {
        eprintln!("skipped: no libgcc_eh.a beside this compiler, build.rs links as before");
        return;
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_buddy"))
        .env("LD_TRACE_LOADED_OBJECTS", "1")
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("libc.so"), "no loader listing: {listed}");
    assert!(
        !listed.contains("libgcc_s"),
        "libgcc_s.so.1 is loaded at start-up again: {listed}"
    );
}
