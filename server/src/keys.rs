//! API keys: made, listed and revoked by `mnemo keys`, checked by the server on every request.
//!
//! A key reads `mnemo_<id>_<secret>`: the id names it in listings and logs, the secret is 32
//! random bytes from the operating system. Only the key's SHA-256 is stored, in `keys.json` in
//! the data directory (mode 0600), so a copy of the file grants nothing. The key itself is shown
//! once, when it is made.
//!
//! The file is rewritten whole through a temporary file and a rename, under an exclusive lock on
//! `keys.json.lock`, so that two `mnemo keys` commands never lose each other's key. A running
//! server reads it again when its size or modification time changes, so a key made or revoked
//! while it runs counts from the next request.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// Why a key operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The key file is not what this version writes.
    #[error("{path} is not a mnemo key file: {reason}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No key has this id.
    #[error("no key `{0}`; `mnemo keys list` shows the ids")]
    NoSuchKey(String),
    /// The request for a key is not acceptable.
    #[error("{0}")]
    Invalid(String),
}

/// One key, as stored (its hash, never the key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRecord {
    /// Names the key: `k` and 12 hex digits.
    pub id: String,
    /// SHA-256 of the whole key, in hex.
    pub hash: String,
    /// The user it acts for; `None` for an admin key.
    pub user_id: Option<String>,
    /// An admin key may act for any user (the `X-Mnemo-User` header) and run jobs.
    pub admin: bool,
    /// The chats it may act in; empty for any chat and the user's own memory outside chats.
    pub chats: Vec<String>,
    /// A note for people (who holds it).
    pub label: Option<String>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it was revoked; it grants nothing from then on.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// What a new key is for.
#[derive(Debug, Clone, Default)]
pub struct NewKey {
    /// The user (required unless `admin`).
    pub user_id: Option<String>,
    /// Whether it is an admin key.
    pub admin: bool,
    /// The chats it is bound to; empty for none.
    pub chats: Vec<String>,
    /// A note for people.
    pub label: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    version: u32,
    keys: Vec<KeyRecord>,
}

const FILE_VERSION: u32 = 1;
const PREFIX: &str = "mnemo_";

/// What the store last read, and the file's size and time when it did.
#[derive(Debug, Default)]
struct Cache {
    seen: Option<(u64, SystemTime)>,
    keys: Vec<KeyRecord>,
}

/// The key file of one data directory.
#[derive(Debug)]
pub struct KeyStore {
    path: PathBuf,
    cache: Mutex<Cache>,
}

impl KeyStore {
    /// The key store in `data_dir` (`keys.json`); nothing is read or written yet.
    pub fn new(data_dir: &Path) -> Self {
        Self {
            path: data_dir.join("keys.json"),
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The key file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes a key; returns its record and the key itself, which is not kept.
    ///
    /// # Errors
    /// A user key without a valid user id, a bad chat id, or the file cannot be written.
    pub fn create(&self, new: NewKey) -> Result<(KeyRecord, String), KeyError> {
        match (&new.user_id, new.admin) {
            (None, false) => {
                return Err(KeyError::Invalid(
                    "a key needs a user (--user), or --admin".to_owned(),
                ))
            }
            (Some(_), true) => {
                return Err(KeyError::Invalid(
                    "an admin key acts for every user; give --user or --admin, not both".to_owned(),
                ))
            }
            _ => {}
        }
        if let Some(user) = &new.user_id {
            mnemo_kernel::check_id("user", user)
                .map_err(|error| KeyError::Invalid(error.to_string()))?;
        }
        for chat in &new.chats {
            mnemo_kernel::check_id("chat", chat)
                .map_err(|error| KeyError::Invalid(error.to_string()))?;
        }
        if new.admin && !new.chats.is_empty() {
            return Err(KeyError::Invalid(
                "an admin key cannot be bound to chats".to_owned(),
            ));
        }
        let id = format!("k{}", hex(&random_bytes::<6>()?));
        let key = format!("{PREFIX}{id}_{}", hex(&random_bytes::<32>()?));
        let record = KeyRecord {
            id,
            hash: digest(&key),
            user_id: new.user_id,
            admin: new.admin,
            chats: new.chats,
            label: new.label,
            created_at: Utc::now(),
            revoked_at: None,
        };
        self.update(|keys| {
            keys.push(record.clone());
            Ok(())
        })?;
        Ok((record, key))
    }

    /// Every key ever made, revoked ones included, oldest first.
    ///
    /// # Errors
    /// The file cannot be read.
    pub fn list(&self) -> Result<Vec<KeyRecord>, KeyError> {
        Ok(self.read()?.keys)
    }

    /// Revokes a key by id; returns its record. Revoking twice keeps the first time.
    ///
    /// # Errors
    /// No such key, or the file cannot be written.
    pub fn revoke(&self, id: &str) -> Result<KeyRecord, KeyError> {
        let mut revoked = None;
        self.update(|keys| {
            let record = keys
                .iter_mut()
                .find(|record| record.id == id)
                .ok_or_else(|| KeyError::NoSuchKey(id.to_owned()))?;
            record.revoked_at.get_or_insert_with(Utc::now);
            revoked = Some(record.clone());
            Ok(())
        })?;
        revoked.ok_or_else(|| KeyError::NoSuchKey(id.to_owned()))
    }

    /// The live key `presented` is, if it is one: the hash matches and it is not revoked.
    ///
    /// # Errors
    /// The file cannot be read.
    pub fn verify(&self, presented: &str) -> Result<Option<KeyRecord>, KeyError> {
        let Some(id) = presented
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once('_'))
            .map(|(id, _)| id)
        else {
            return Ok(None);
        };
        let hash = digest(presented);
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let stamp = self.stamp()?;
        if cache.seen != stamp || stamp.is_none() {
            let file = self.read()?;
            *cache = Cache {
                seen: stamp,
                keys: file.keys,
            };
        }
        Ok(cache
            .keys
            .iter()
            .find(|record| record.id == id)
            .filter(|record| record.revoked_at.is_none())
            .filter(|record| same(record.hash.as_bytes(), hash.as_bytes()))
            .cloned())
    }

    /// The file's size and modification time; `None` while it does not exist.
    fn stamp(&self) -> Result<Option<(u64, SystemTime)>, KeyError> {
        match std::fs::metadata(&self.path) {
            Ok(metadata) => Ok(Some((
                metadata.len(),
                metadata.modified().map_err(|source| self.io(source))?,
            ))),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(self.io(source)),
        }
    }

    fn read(&self) -> Result<KeyFile, KeyError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(KeyFile {
                    version: FILE_VERSION,
                    keys: Vec::new(),
                })
            }
            Err(source) => return Err(self.io(source)),
        };
        let file: KeyFile = serde_json::from_str(&text).map_err(|error| KeyError::Corrupt {
            path: self.path.display().to_string(),
            reason: error.to_string(),
        })?;
        if file.version != FILE_VERSION {
            return Err(KeyError::Corrupt {
                path: self.path.display().to_string(),
                reason: format!("version {} (this mnemo reads {FILE_VERSION})", file.version),
            });
        }
        Ok(file)
    }

    /// Reads, changes and rewrites the file under the lock; nothing is written if `change` fails.
    fn update(
        &self,
        change: impl FnOnce(&mut Vec<KeyRecord>) -> Result<(), KeyError>,
    ) -> Result<(), KeyError> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| self.io(source))?;
        }
        let lock_path = self.path.with_extension("json.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| self.io(source))?;
        lock.lock().map_err(|source| self.io(source))?;
        let mut file = self.read()?;
        change(&mut file.keys)?;
        let text = serde_json::to_string_pretty(&file).map_err(|error| KeyError::Corrupt {
            path: self.path.display().to_string(),
            reason: error.to_string(),
        })?;
        let temporary = self.path.with_extension("json.tmp");
        let mut options = std::fs::OpenOptions::new();
        options.create(true).truncate(true).write(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut out = options.open(&temporary).map_err(|source| self.io(source))?;
        out.write_all(text.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.sync_all())
            .map_err(|source| self.io(source))?;
        std::fs::rename(&temporary, &self.path).map_err(|source| self.io(source))?;
        if let Some(dir) = self.path.parent() {
            if let Ok(dir) = std::fs::File::open(dir) {
                let _ = dir.sync_all();
            }
        }
        Ok(())
    }

    fn io(&self, source: std::io::Error) -> KeyError {
        KeyError::Io {
            path: self.path.display().to_string(),
            source,
        }
    }
}

fn random_bytes<const N: usize>() -> Result<[u8; N], KeyError> {
    let mut bytes = [0_u8; N];
    getrandom::fill(&mut bytes).map_err(|error| KeyError::Io {
        path: "the operating system's random source".to_owned(),
        source: std::io::Error::other(error.to_string()),
    })?;
    Ok(bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn digest(key: &str) -> String {
    hex(&Sha256::digest(key.as_bytes()))
}

/// Equality that takes as long whatever the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0_u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_stored_hashed_verifies_and_stops_when_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore::new(dir.path());
        let (record, key) = store
            .create(NewKey {
                user_id: Some("alice".to_owned()),
                ..NewKey::default()
            })
            .unwrap();
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(!text.contains(&key), "the key itself is never written");
        assert!(text.contains(&record.hash));
        assert_eq!(store.verify(&key).unwrap().unwrap().id, record.id);
        let mut forged = key.clone();
        forged.pop();
        forged.push(if key.ends_with('0') { '1' } else { '0' });
        assert!(store.verify(&forged).unwrap().is_none());
        assert!(store.verify("Bearer nonsense").unwrap().is_none());
        // Another process revokes it: the running store sees the file change.
        KeyStore::new(dir.path()).revoke(&record.id).unwrap();
        assert!(store.verify(&key).unwrap().is_none());
        assert!(store.list().unwrap()[0].revoked_at.is_some());
    }

    #[test]
    fn bad_requests_for_keys_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore::new(dir.path());
        for new in [
            NewKey::default(),
            NewKey {
                user_id: Some("a".to_owned()),
                admin: true,
                ..NewKey::default()
            },
            NewKey {
                user_id: Some(" ".to_owned()),
                ..NewKey::default()
            },
            NewKey {
                admin: true,
                chats: vec!["c".to_owned()],
                ..NewKey::default()
            },
        ] {
            assert!(matches!(store.create(new), Err(KeyError::Invalid(_))));
        }
        assert!(matches!(store.revoke("k0"), Err(KeyError::NoSuchKey(_))));
        assert!(!store.path().exists());
    }
}
