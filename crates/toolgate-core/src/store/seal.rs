//! Sealing stored values: ChaCha20-Poly1305 with a random 96-bit nonce per value, the
//! kind, id and owner bound in as associated data (a value cannot be moved to another
//! id or owner and still open).
//!
//! The key is 32 bytes written as 64 hex digits. It comes from the environment variable
//! `[store] key_env` names (default `TOOLGATE_STORE_KEY`), else, for the embedded store,
//! from a key file beside the database (`<path>.key`, made with mode 0600 on first start).

use super::{Kind, OpenError, StoreFault};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use std::io::Write;
use std::path::Path;

const NONCE: usize = 12;

/// Seals and opens values with one key.
pub struct Sealer {
    cipher: ChaCha20Poly1305,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

impl Sealer {
    /// A sealer with this key.
    pub fn new(key: [u8; 32]) -> Self {
        Self {
            cipher: ChaCha20Poly1305::new(Key::from_slice(&key)),
        }
    }

    /// Reads a key written as 64 hex digits; `source` names where it came from, for the
    /// error.
    pub(crate) fn from_hex(text: &str, source: &str) -> Result<Self, OpenError> {
        let bytes = hex::decode(text.trim()).map_err(|e| OpenError::KeyNotHex {
            place: source.to_string(),
            source: e,
        })?;
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|b: Vec<u8>| OpenError::KeyLength {
                place: source.to_string(),
                bytes: b.len(),
            })?;
        Ok(Self::new(key))
    }

    /// The key in the variable `name`, if it is set (and not empty).
    pub fn from_env(name: &str) -> Result<Option<Self>, OpenError> {
        match std::env::var(name) {
            Ok(hex) if !hex.trim().is_empty() => Self::from_hex(&hex, name).map(Some),
            _ => Ok(None),
        }
    }

    /// The key in `path`, made (random, mode 0600) if the file does not exist yet.
    pub fn from_key_file(path: &Path) -> Result<Self, OpenError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::from_hex(&text, &path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key: [u8; 32] = rand::random();
                write_private(path, &hex::encode(key)).map_err(|e| OpenError::KeyFileWrite {
                    path: path.to_path_buf(),
                    source: e,
                })?;
                tracing::info!(path = %path.display(), "made a new store key file");
                Ok(Self::new(key))
            }
            Err(e) => Err(OpenError::KeyFileRead {
                path: path.to_path_buf(),
                source: e,
            }),
        }
    }

    /// What a backend writes for `record` under `id`: its sealed value and its live
    /// [`Meta`](super::Meta), encoded.
    pub(super) fn seal_record(
        &self,
        kind: Kind,
        id: &str,
        record: &super::Record,
    ) -> (Vec<u8>, Vec<u8>) {
        let sealed = self.seal(kind, id, &record.owner, &record.value);
        let meta = super::Meta {
            live: true,
            expires_ms: record.expires_ms,
            owner: record.owner.clone(),
        };
        (sealed, meta.encode())
    }

    /// `plain` sealed under a random nonce, bound to its kind, id and owner.
    pub fn seal(&self, kind: Kind, id: &str, owner: &str, plain: &[u8]) -> Vec<u8> {
        let nonce: [u8; NONCE] = rand::random();
        let aad = aad(kind, id, owner);
        let sealed = self
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plain,
                    aad: &aad,
                },
            )
            .expect("ChaCha20-Poly1305 encrypts any length the store keeps");
        let mut out = Vec::with_capacity(NONCE + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// The plain value of `sealed`, if it was sealed with this key for this kind, id and owner.
    pub fn open(
        &self,
        kind: Kind,
        id: &str,
        owner: &str,
        sealed: &[u8],
    ) -> Result<Vec<u8>, StoreFault> {
        let fail = |detail: &str| StoreFault::Unsealed {
            kind,
            detail: detail.into(),
        };
        if sealed.len() < NONCE {
            return Err(fail("too short"));
        }
        let (nonce, body) = sealed.split_at(NONCE);
        let aad = aad(kind, id, owner);
        self.cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: body,
                    aad: &aad,
                },
            )
            .map_err(|_| fail("it does not open with this key"))
    }
}

fn aad(kind: Kind, id: &str, owner: &str) -> Vec<u8> {
    format!("toolgate-store-v1\0{kind}\0{id}\0{owner}").into_bytes()
}

/// A warning when the key file at `path` may be read by others than its owner (whoever
/// reads it can open every stored value); `None` when it is private or absent.
pub fn key_file_warning(path: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Some(format!(
                "the store key file {} may be read by others (mode {mode:o}): whoever reads it can open every stored value; make it private with `chmod 600 {}`",
                path.display(),
                path.display()
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    None
}

/// Writes `text` to a new file readable by its owner only.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_for_its_own_kind_id_and_owner() {
        let s = Sealer::new([7; 32]);
        let sealed = s.seal(Kind::Pages, "a", "alice", b"secret page");
        assert!(!sealed.windows(6).any(|w| w == b"secret"));
        assert_eq!(
            s.open(Kind::Pages, "a", "alice", &sealed).unwrap(),
            b"secret page"
        );
        assert!(s.open(Kind::Pages, "a", "bob", &sealed).is_err());
        assert!(s.open(Kind::Pages, "b", "alice", &sealed).is_err());
        assert!(Sealer::new([8; 32])
            .open(Kind::Pages, "a", "alice", &sealed)
            .is_err());
    }

    #[test]
    fn a_key_file_is_made_once_with_owner_only_permissions_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb.key");
        let first = Sealer::from_key_file(&path).unwrap();
        let sealed = first.seal(Kind::Operation, "x", "o", b"v");
        let again = Sealer::from_key_file(&path).unwrap();
        assert_eq!(
            again.open(Kind::Operation, "x", "o", &sealed).unwrap(),
            b"v"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn a_malformed_key_says_how_to_make_one() {
        let e = Sealer::from_hex("abc", "TOOLGATE_STORE_KEY")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("64 hex digits") && e.contains("openssl rand -hex 32"),
            "{e}"
        );
    }
}
