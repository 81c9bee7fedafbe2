//! API keys: made, listed and revoked by `mnemo keys` and the admin endpoints, checked by the
//! server on every request.
//!
//! A key reads `mnemo_<id>_<secret>`: the id names it in listings and logs, the secret is 32
//! random bytes from the operating system. Only the key's SHA-256 is stored, in the memory store
//! (`api_keys`), so a copy of the database grants nothing, and every server on one store accepts
//! the same keys. The key itself is shown once, when it is made.
//!
//! A server looks the key up in the store on every request (one primary-key read), so a key
//! revoked through any server is refused by every server from its next request. A data directory's
//! `keys.json` (where keys lived before) is imported into the store once, at the first start
//! that finds it, and ignored from then on with a warning that says so.

use std::path::Path;
use std::sync::Arc;

use chrono::Utc;
use mnemo_memory_api::{MemoryApiError, MemoryHost};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

pub use mnemo_memory_api::KeyRecord;

/// Why a key operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] MemoryApiError),
    /// The old key file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The old key file is not what earlier versions wrote.
    #[error("{path} is not a mnemo key file: {reason}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The store's database does not answer (its probe says why): nothing can be checked now.
    #[error("the memory store's database does not answer ({0}); retry shortly")]
    Unavailable(String),
    /// No key has this id.
    #[error("no key `{0}`; `mnemo keys list` shows the ids")]
    NoSuchKey(String),
    /// The request for a key is not acceptable.
    #[error("{0}")]
    Invalid(String),
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

/// The key file of earlier versions, read once to import it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    version: u32,
    keys: Vec<KeyRecord>,
}

const FILE_VERSION: u32 = 1;
const PREFIX: &str = "mnemo_";

/// What happened to a data directory's `keys.json` when the key store opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyFileImport {
    /// There is none.
    NoFile,
    /// Its keys were copied into the store now (how many were new).
    Imported(usize),
    /// The same file was imported before, at the time given; it is ignored.
    ImportedBefore(String),
}

/// The API keys of one memory store.
pub struct KeyStore {
    memory: Arc<dyn MemoryHost>,
}

impl std::fmt::Debug for KeyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyStore").finish_non_exhaustive()
    }
}

impl KeyStore {
    /// The keys kept in `memory`'s store. Reads nothing yet.
    pub fn new(memory: Arc<dyn MemoryHost>) -> Self {
        Self { memory }
    }

    /// Imports `data_dir/keys.json` into the store unless that same file was imported before,
    /// and says which happened (the caller warns: the file is not read again).
    ///
    /// # Errors
    /// The file cannot be read or is not a key file, or the store fails; nothing is marked as
    /// imported then.
    pub async fn import_key_file(&self, data_dir: &Path) -> Result<KeyFileImport, KeyError> {
        let path = data_dir.join("keys.json");
        let io = |source| KeyError::Io {
            path: path.display().to_string(),
            source,
        };
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(KeyFileImport::NoFile)
            }
            Err(source) => return Err(io(source)),
        };
        let setting = format!("keys_json_imported:{}", hex(&Sha256::digest(&text)));
        if let Some(when) = self.memory.store_setting(&setting).await? {
            return Ok(KeyFileImport::ImportedBefore(when));
        }
        let corrupt = |reason: String| KeyError::Corrupt {
            path: path.display().to_string(),
            reason,
        };
        let file: KeyFile =
            serde_json::from_slice(&text).map_err(|error| corrupt(error.to_string()))?;
        if file.version != FILE_VERSION {
            return Err(corrupt(format!(
                "version {} (this mnemo reads {FILE_VERSION})",
                file.version
            )));
        }
        let mut new = 0;
        for key in &file.keys {
            // A key revoked in the store stays revoked: an existing id is left as it is.
            if self.memory.insert_key(key).await? {
                new += 1;
            }
        }
        self.memory
            .set_store_setting(&setting, &Utc::now().to_rfc3339())
            .await?;
        Ok(KeyFileImport::Imported(new))
    }

    /// Makes a key; returns its record and the key itself, which is not kept.
    ///
    /// # Errors
    /// A user key without a valid user id, a bad chat id, or the store fails.
    pub async fn create(&self, new: NewKey) -> Result<(KeyRecord, String), KeyError> {
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
        if !self.memory.insert_key(&record).await? {
            return Err(KeyError::Invalid(format!(
                "a key `{}` exists already (48 random bits met twice); make another",
                record.id
            )));
        }
        Ok((record, key))
    }

    /// Every key ever made, revoked ones included, oldest first.
    ///
    /// # Errors
    /// The store fails.
    pub async fn list(&self) -> Result<Vec<KeyRecord>, KeyError> {
        Ok(self.memory.keys().await?)
    }

    /// Whether any key is live.
    ///
    /// # Errors
    /// The store fails.
    pub async fn any_live(&self) -> Result<bool, KeyError> {
        Ok(self
            .list()
            .await?
            .iter()
            .any(|key| key.revoked_at.is_none()))
    }

    /// Revokes a key by id; returns its record. Revoking twice keeps the first time.
    ///
    /// # Errors
    /// No such key, or the store fails.
    pub async fn revoke(&self, id: &str) -> Result<KeyRecord, KeyError> {
        let revoked = self.memory.revoke_key(id, Utc::now()).await?;
        revoked.ok_or_else(|| KeyError::NoSuchKey(id.to_owned()))
    }

    /// The live key `presented` is, if it is one: the hash matches and the store does not hold
    /// it revoked.
    ///
    /// # Errors
    /// The store fails.
    pub async fn verify(&self, presented: &str) -> Result<Option<KeyRecord>, KeyError> {
        let Some(id) = presented
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once('_'))
            .map(|(id, _)| id)
        else {
            return Ok(None);
        };
        // While the database is known to be down, refuse at once rather than wait for a
        // connection that will not come.
        if let Some(reason) = self.memory.store_unreachable() {
            return Err(KeyError::Unavailable(reason));
        }
        let Some(record) = self.memory.key(id).await? else {
            return Ok(None);
        };
        let hash = digest(presented);
        Ok(Some(record)
            .filter(|record| record.revoked_at.is_none())
            .filter(|record| same(record.hash.as_bytes(), hash.as_bytes())))
    }
}

/// Imports `data_dir/keys.json` into `keys`' store (see [`KeyStore::import_key_file`]) and says
/// in the log what became of the file, for `mnemo serve` and `mnemo keys`.
///
/// # Errors
/// As [`KeyStore::import_key_file`].
pub async fn import_announced(keys: &KeyStore, data_dir: &Path) -> Result<(), KeyError> {
    let path = data_dir.join("keys.json");
    match keys.import_key_file(data_dir).await? {
        KeyFileImport::NoFile => {}
        KeyFileImport::Imported(new) => tracing::warn!(
            file = %path.display(),
            new,
            "imported the API keys of this file into the memory store, where keys live now; \
             the file is ignored from now on and can be deleted"
        ),
        KeyFileImport::ImportedBefore(when) => tracing::warn!(
            file = %path.display(),
            imported_at = %when,
            "this key file is ignored: its keys were imported into the memory store, where keys \
             live now; delete it"
        ),
    }
    Ok(())
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
