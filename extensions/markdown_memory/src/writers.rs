//! Who left a temporary file or a directory being erased, and whether it may still be at work.
//!
//! Every process that opens a workspace sweeps what interrupted writes and erasures left behind,
//! while other processes may be writing in the same workspace. So the name of each such file
//! carries its writer, `{host}-{pid}`, and the sweep removes a file only when it is certainly
//! abandoned: its writer runs on this machine, in this process namespace, and is gone (no
//! `/proc/{pid}`), or the file is older than [`ABANDONED_AFTER`], far longer than any write.
//!
//! `{host}` is a hash of the boot id and the pid namespace, so that a process id is only judged
//! where it means the same process: a workspace shared by two containers or over a network
//! never has one side remove the other's files early. Where `/proc` is missing (not Linux), no
//! writer can be judged, and only age counts.

use std::fs;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

/// A temporary file this old is abandoned whoever wrote it: a whole-file write takes
/// milliseconds, and a day covers a process that was suspended in the middle of one.
pub(crate) const ABANDONED_AFTER: Duration = Duration::from_secs(24 * 3600);

/// FNV-1a, 64 bits.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// This machine's boot and pid namespace, as 8 hex digits; `None` without `/proc`.
fn host() -> Option<&'static str> {
    static HOST: OnceLock<Option<String>> = OnceLock::new();
    HOST.get_or_init(|| {
        let boot = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let namespace = fs::read_link("/proc/self/ns/pid").ok()?;
        let mut key = boot.trim().as_bytes().to_vec();
        key.push(b'/');
        key.extend_from_slice(namespace.to_string_lossy().as_bytes());
        Some(format!("{:08x}", fnv1a(&key) as u32))
    })
    .as_deref()
}

/// This process as it is named in its temporary files: `{host}-{pid}`, or `{pid}` without
/// `/proc`.
pub(crate) fn tag() -> String {
    match host() {
        Some(host) => format!("{host}-{}", std::process::id()),
        None => std::process::id().to_string(),
    }
}

/// Whether the writer named by `writer` (a [`tag`]) is certainly gone: it ran here and its
/// process no longer exists.
pub(crate) fn is_gone(writer: &str) -> bool {
    let (Some(here), Some((host, pid))) = (host(), writer.split_once('-')) else {
        // Untagged (no `/proc` when it was written, or an older version): it cannot be judged.
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    host == here && pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists()
}

/// Whether the temporary file or directory at `path`, written by `writer` (the tag in its
/// name, if it has one), is certainly abandoned and may be removed.
pub(crate) fn is_abandoned(path: &Path, writer: Option<&str>) -> bool {
    if writer.is_some_and(is_gone) {
        return true;
    }
    let age = fs::symlink_metadata(path)
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|modified| SystemTime::now().duration_since(modified).ok());
    age.is_some_and(|age| age > ABANDONED_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_gone_writer_of_this_host_is_judged() {
        assert!(!is_gone(&tag()), "this process is alive");
        assert!(!is_gone("12345"), "an untagged writer cannot be judged");
        assert!(
            !is_gone("00000000-4000000"),
            "another host's writer is not judged"
        );
        assert!(!is_gone("garbage"));
        if let Some(here) = host() {
            // No Linux pid is this large (pid_max is at most 2^22).
            assert!(is_gone(&format!("{here}-4000000000")));
            assert!(!is_gone(&format!("{here}-1")), "init is alive");
        }
    }
}
