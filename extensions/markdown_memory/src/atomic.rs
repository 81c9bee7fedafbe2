//! Whole-file writes that are all or nothing, and appends that never touch earlier bytes.
//!
//! A whole-file write goes to a temporary file beside the target (same directory, so the same file
//! system), is flushed to disk (`fsync`), then renamed over the target, and the directory is
//! flushed too. A reader sees the old file or the new one, never a mix; a crash before the rename
//! leaves the old file as it was and a stray temporary file, which readers skip (its name starts
//! with `.` and ends with `.tmp`) and [`crate::Workspace::open`] removes once it is certainly
//! abandoned: the name `.{target}.{writer}.{n}.tmp` tells which process wrote it (see
//! `writers.rs`), so that a write another live process has in progress is never removed.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::writers;

/// Distinguishes temporary files of concurrent writes in one process.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// True for the name of a temporary file left by an unfinished [`StagedWrite`].
pub fn is_temp_file(file_name: &str) -> bool {
    file_name.starts_with('.') && file_name.ends_with(".tmp")
}

/// The writer named in a temporary file's name `.{target}.{writer}.{n}.tmp`, if it is one.
pub(crate) fn temp_file_writer(file_name: &str) -> Option<&str> {
    let inner = file_name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let mut parts = inner.rsplitn(3, '.');
    parts.next()?.parse::<u64>().ok()?;
    let writer = parts.next()?;
    parts.next()?;
    Some(writer)
}

/// A whole-file write in progress: the new content is on disk in a temporary file beside the
/// target, and the target is untouched until [`StagedWrite::commit`].
///
/// Dropping it without committing removes the temporary file.
#[derive(Debug)]
pub struct StagedWrite {
    temp: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl StagedWrite {
    /// Writes `content` to a new temporary file beside `target` and flushes it to disk.
    ///
    /// # Errors
    /// The directory is missing or not writable, or the disk is full; the target is untouched.
    pub fn stage(target: &Path, content: &[u8]) -> io::Result<Self> {
        let dir = parent_of(target);
        let file_name = target
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "the target has no file name")
            })?;
        let temp = dir.join(format!(
            ".{file_name}.{}.{}.tmp",
            writers::tag(),
            NEXT_TEMP.fetch_add(1, Ordering::Relaxed)
        ));
        let staged = Self {
            temp,
            target: target.to_path_buf(),
            committed: false,
        };
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&staged.temp)?;
        file.write_all(content)?;
        file.sync_all()?;
        Ok(staged)
    }

    /// The temporary file holding the new content.
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// Renames the temporary file over the target and flushes the directory entry.
    ///
    /// # Errors
    /// The rename failed; the target keeps its old content and the temporary file is removed.
    pub fn commit(mut self) -> io::Result<()> {
        fs::rename(&self.temp, &self.target)?;
        self.committed = true;
        sync_dir(parent_of(&self.target));
        Ok(())
    }
}

impl Drop for StagedWrite {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.temp);
        }
    }
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Flushes a directory's entries, so a rename or a new file survives a power loss. Best effort:
/// some platforms cannot open a directory for this, and the data itself is already on disk.
fn sync_dir(dir: &Path) {
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
}

/// Replaces `target` with `content` atomically: readers see the old file or the new one.
///
/// # Errors
/// As [`StagedWrite::stage`] and [`StagedWrite::commit`]; the target is then unchanged.
pub fn write_atomic(target: &Path, content: &[u8]) -> io::Result<()> {
    StagedWrite::stage(target, content)?.commit()
}

/// Appends `content` to `target` (created if missing) in one write and flushes it to disk.
///
/// Earlier bytes are never rewritten. If the file does not end with a newline (edited by hand),
/// one is written first so the new entry starts on its own line.
///
/// # Errors
/// The file cannot be opened or written.
pub(crate) fn append(target: &Path, content: &[u8]) -> io::Result<()> {
    let existed = target.exists();
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(target)?;
    let length = file.metadata()?.len();
    let mut bytes = Vec::with_capacity(content.len() + 1);
    if length > 0 {
        let mut last = [0u8; 1];
        file.seek(SeekFrom::End(-1))?;
        file.read_exact(&mut last)?;
        if last[0] != b'\n' {
            bytes.push(b'\n');
        }
    }
    bytes.extend_from_slice(content);
    file.write_all(&bytes)?;
    file.sync_data()?;
    if !existed {
        sync_dir(parent_of(target));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_stage_leaves_the_target_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("MEMORY.md");
        fs::write(&target, "old").unwrap();
        let staged = StagedWrite::stage(&target, b"new").unwrap();
        let temp = staged.temp_path().to_path_buf();
        let name = temp.file_name().unwrap().to_string_lossy().into_owned();
        assert!(is_temp_file(&name));
        assert_eq!(temp_file_writer(&name), Some(writers::tag().as_str()));
        assert_eq!(fs::read_to_string(&temp).unwrap(), "new");
        drop(staged);
        assert!(!temp.exists());
        assert_eq!(fs::read_to_string(&target).unwrap(), "old");
    }

    #[test]
    fn the_writer_is_read_from_the_end_of_the_name() {
        assert_eq!(
            temp_file_writer(".a.b.md.1f2e3d4c-77.3.tmp"),
            Some("1f2e3d4c-77")
        );
        assert_eq!(temp_file_writer(".MEMORY.md.77.0.tmp"), Some("77"));
        assert_eq!(temp_file_writer(".notes.tmp"), None);
        assert_eq!(temp_file_writer(".x.77.zero.tmp"), None);
        assert_eq!(temp_file_writer("x.77.0.tmp"), None);
    }

    #[test]
    fn append_starts_a_new_line_after_a_hand_edit() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("log.md");
        append(&target, b"one\n").unwrap();
        fs::write(&target, "one\nhand edit").unwrap();
        append(&target, b"two\n").unwrap();
        assert_eq!(
            fs::read_to_string(&target).unwrap(),
            "one\nhand edit\ntwo\n"
        );
    }
}
