//! Room for file descriptors, made before the server's threads start.
//!
//! Linux keeps a process's open files in a table that grows by doubling when
//! a new descriptor does not fit. In a process with more than one thread,
//! growing it waits for an RCU grace period (`synchronize_rcu`), and every
//! other thread that opens a file or accepts a connection meanwhile waits too.
//! On the 2-core machine `docs/PERFORMANCE.md` measures, that wait was
//! 12-16 ms, with both runtime workers asleep and every stream stalled: a
//! served session holds two sockets and its session file while it runs, so a
//! burst of prompts crossed a doubling mid-stream. A single-threaded process
//! grows the table without that wait, so `buddy serve` grows it once, before
//! the runtime exists.
//!
//! It also raises the soft `RLIMIT_NOFILE` when the server's limits need
//! more descriptors than it allows (5,000 connections with the common soft
//! limit of 1,024), up to what they need and never past the hard limit.
//! The commands its tools start inherit the raised limit; that is harmless
//! at these sizes (a program that closes every possible descriptor at
//! start-up is slow only with limits in the millions, which is why it is not
//! raised to the hard limit).

use std::os::fd::RawFd;

/// Descriptors made room for: two sockets and a session file per running
/// session come to some 1,300 sessions. The table costs the kernel 8 bytes a
/// slot (32 KiB here); past this it grows as before, one wait per doubling.
pub const RESERVED: u64 = 4096;

/// Grows the descriptor table to hold `min(RESERVED, the soft RLIMIT_NOFILE)`
/// descriptors. Call it while the process has one thread. Best effort: on any
/// failure the table just grows later, as it would have.
pub fn reserve() {
    reserve_for(RESERVED);
}

/// Grows the table to `min(want, the soft RLIMIT_NOFILE)` descriptors
/// (best effort, like [`reserve`]).
fn reserve_for(want: u64) {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    let want = want.min(limit);
    let Ok(highest) = RawFd::try_from(want.saturating_sub(1)) else {
        return;
    };
    if highest < 3 {
        return;
    }
    let Ok(null) = std::fs::File::open("/dev/null") else {
        return;
    };
    // A copy at the highest slot makes the table that large; closing it
    // (the drop) leaves the table as it is: Linux never shrinks it.
    let _copy = rustix::io::fcntl_dupfd_cloexec(&null, highest);
}

/// Raises the soft `RLIMIT_NOFILE` to `need` (at most the hard limit) when
/// it is lower, and grows the table to match; the soft limit now in force
/// (`u64::MAX` for none), which the connection cap then fits in. Best
/// effort: on failure the server runs with the limit it had.
pub fn raise(need: u64) -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    let soft = now.current.unwrap_or(u64::MAX);
    if soft < need {
        let want = now.maximum.map_or(need, |hard| need.min(hard));
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(want),
                maximum: now.maximum,
            },
        );
    }
    reserve_for(need.max(RESERVED));
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's size, as the kernel reports it.
    fn table_size() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("FDSize:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    #[test]
    fn the_table_holds_the_reserved_descriptors_and_the_copy_is_closed() {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .unwrap_or(u64::MAX);
        let want = RESERVED.min(limit);
        reserve();
        assert!(
            table_size() >= want,
            "FDSize {} after reserve (limit {limit})",
            table_size()
        );
        // Nothing else in this process gets near the top slot.
        let top = std::path::PathBuf::from(format!("/proc/self/fd/{}", want - 1));
        assert!(!top.exists(), "descriptor {} was left open", want - 1);
    }
}
