//! The sandbox's system-call filter: a seccomp program, installed by the
//! sandbox wrapper (`host::sandbox`) after its Landlock rules and before it
//! `exec`s the command, that makes the calls Landlock has no right for fail
//! with `EPERM`: changing a file's owner or group, writing or removing its
//! extended attributes, and setting its flags (`chattr`). Everything else is
//! allowed; the filter never kills a process for calling them.
//!
//! It does not own the file rules (Landlock, in `sandbox.rs`) and does not
//! filter `chmod` or file times: seccomp sees numbers, not paths, so it
//! cannot tell `chmod +x ./build.sh` from a `chmod` outside the workspace,
//! and workspace work (`git checkout`, `make`, `touch`) needs both.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// `setxattrat(2)` and `removexattrat(2)` (Linux 6.13): calls numbered after
/// 424 are the same on every architecture. Too new for the `libc` crate's
/// tables; on an older kernel they do not exist and the rule costs nothing.
const SYS_SETXATTRAT: i64 = 463;
const SYS_REMOVEXATTRAT: i64 = 466;

/// The calls refused, by this build's numbers (seccomp sees the caller's
/// architecture's numbers; buddy and the shell it starts share them).
#[cfg(target_arch = "x86_64")]
const REFUSED: &[i64] = &[
    // Ownership.
    libc::SYS_chown,
    libc::SYS_lchown,
    libc::SYS_fchown,
    libc::SYS_fchownat,
    // Extended attributes, written or removed.
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    SYS_SETXATTRAT,
    SYS_REMOVEXATTRAT,
    // io_uring can set extended attributes (IORING_OP_SETXATTR and
    // FSETXATTR) without passing through the calls above; programs that use
    // it fall back to plain calls when it is refused, as under Docker.
    libc::SYS_io_uring_setup,
];

/// aarch64 has no `chown` or `lchown`: libc implements them with `fchownat`.
#[cfg(target_arch = "aarch64")]
const REFUSED: &[i64] = &[
    libc::SYS_fchown,
    libc::SYS_fchownat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    SYS_SETXATTRAT,
    SYS_REMOVEXATTRAT,
    libc::SYS_io_uring_setup,
];

/// File flags (`chattr +i`, `+a`: immutable, append-only) and the project
/// and extended flags are set by `ioctl` on a descriptor that read access
/// opens, so they are refused by request number: `FS_IOC_SETFLAGS`, its
/// 32-bit spelling (accepted from x32), and `FS_IOC_FSSETXATTR`. Only the low
/// 32 bits are compared, as the kernel reads only those.
const REFUSED_IOCTLS: &[u64] = &[0x4008_6602, 0x4004_6602, 0x401c_5820];

#[cfg(target_arch = "x86_64")]
const IOCTLS: &[i64] = &[libc::SYS_ioctl, X32_IOCTL];
/// x32 has its own `ioctl` (a compat entry point), not the native number.
#[cfg(target_arch = "x86_64")]
const X32_IOCTL: i64 = X32_BIT | 514;
#[cfg(target_arch = "aarch64")]
const IOCTLS: &[i64] = &[libc::SYS_ioctl];

/// On x86_64 the same calls can be made through the x32 ABI: the same numbers
/// with this bit set, under the same architecture tag. Refused too, so a
/// kernel with x32 enabled is no way around the filter.
#[cfg(target_arch = "x86_64")]
const X32_BIT: i64 = 0x4000_0000;

/// The numbers the filter refuses: the native ones, and on x86_64 their x32
/// twins.
fn refused_numbers() -> Vec<i64> {
    #[cfg(target_arch = "x86_64")]
    {
        REFUSED.iter().flat_map(|&nr| [nr, nr | X32_BIT]).collect()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        REFUSED.to_vec()
    }
}

/// Why the system-call filter cannot be built or installed; the crate's
/// own error is kept as its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("no system-call filter for {arch}: {detail}")]
    NoArch { arch: &'static str, detail: String },
    #[error("cannot build the system-call filter: {0}")]
    Build(String),
    #[error("cannot install the system-call filter: {0}")]
    Install(String),
}

/// The filter as a BPF program: each refused call answers `EPERM`, any other
/// is allowed. A process of another architecture (a 32-bit program on a
/// 64-bit kernel) is killed at its first call, since its numbers mean other
/// calls: failing closed is the crate's rule and ours.
pub fn program() -> Result<BpfProgram, FilterError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| FilterError::NoArch {
        arch: std::env::consts::ARCH,
        detail: e.to_string(),
    })?;
    let build = |e: seccompiler::BackendError| FilterError::Build(e.to_string());
    // An empty rule list matches the call whatever its arguments.
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = refused_numbers()
        .into_iter()
        .map(|nr| (nr, Vec::new()))
        .collect();
    let ioctl_rules = REFUSED_IOCTLS
        .iter()
        .map(|&request| {
            let cond =
                SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request)?;
            SeccompRule::new(vec![cond])
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(build)?;
    for &nr in IOCTLS {
        rules.insert(nr, ioctl_rules.clone());
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(build)?;
    BpfProgram::try_from(filter).map_err(build)
}

/// Sets `no_new_privs` and installs the filter on the calling thread; it is
/// inherited by every process the thread starts and cannot be removed. Meant
/// for the sandbox wrapper, which is single-threaded.
pub fn install() -> Result<(), FilterError> {
    let prog = program()?;
    seccompiler::apply_filter(&prog).map_err(|e| FilterError::Install(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_builds_for_this_architecture() {
        let prog = program().unwrap();
        // At least a comparison per refused call, well under the kernel's
        // limit of 4,096 instructions.
        assert!(prog.len() > refused_numbers().len(), "{}", prog.len());
        assert!(prog.len() < 4096, "{}", prog.len());
    }

    #[test]
    fn every_ownership_and_xattr_write_call_is_listed() {
        let nrs = refused_numbers();
        for nr in [
            libc::SYS_fchown,
            libc::SYS_fchownat,
            libc::SYS_setxattr,
            libc::SYS_lsetxattr,
            libc::SYS_fsetxattr,
            libc::SYS_removexattr,
            libc::SYS_lremovexattr,
            libc::SYS_fremovexattr,
        ] {
            assert!(nrs.contains(&nr), "{nr}");
        }
        #[cfg(target_arch = "x86_64")]
        for nr in [libc::SYS_chown, libc::SYS_lchown] {
            assert!(nrs.contains(&nr) && nrs.contains(&(nr | X32_BIT)), "{nr}");
        }
        // What workspace work needs stays out.
        for nr in [
            libc::SYS_fchmod,
            libc::SYS_fchmodat,
            libc::SYS_utimensat,
            libc::SYS_getxattr,
            libc::SYS_listxattr,
        ] {
            assert!(!nrs.contains(&nr), "{nr}");
        }
    }
}
