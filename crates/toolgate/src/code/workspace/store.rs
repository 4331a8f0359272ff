//! Where workspace files are kept: the [`WorkspaceStore`] interface and its two stores,
//! in memory ([`MemoryStore`], the default; gone with the process) and a directory
//! ([`DirStore`], `code.workspace.dir`; survives restarts, and the operator's
//! `toolgate workspace` reads it). A durable shared store (the gateway's store, once it
//! has one) plugs in by implementing the same five methods.
//!
//! Stores only keep bytes: paths arrive checked (see `paths`), and quotas and expiry are
//! the [`super::Workspace`]'s, so every store enforces the same ones.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// One stored file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileMeta {
    /// Relative to the workspace, `/`-separated (`leads.csv`, `runs/2026-12-01.json`).
    pub path: String,
    pub bytes: u64,
    /// Last written (expiry counts from here).
    pub modified: SystemTime,
}

/// The files of each principal. Implementations are shared by every session.
pub trait WorkspaceStore: Send + Sync {
    /// Every file of `owner`, in path order.
    fn list(&self, owner: &str) -> io::Result<Vec<FileMeta>>;
    /// A file's bytes, `None` when there is none.
    fn read(&self, owner: &str, path: &str) -> io::Result<Option<Vec<u8>>>;
    /// Creates or replaces a file.
    fn write(&self, owner: &str, path: &str, data: &[u8]) -> io::Result<()>;
    /// Removes a file; whether there was one.
    fn remove(&self, owner: &str, path: &str) -> io::Result<bool>;
    /// The principals that have files.
    fn owners(&self) -> io::Result<Vec<String>>;
    /// What a file carries for `[code.flows]` (JSON, kept beside it), `None` when nothing.
    fn tags(&self, owner: &str, path: &str) -> io::Result<Option<Vec<u8>>>;
    /// Sets (or, with `None`, clears) what a file carries; removing the file clears it too.
    fn set_tags(&self, owner: &str, path: &str, tags: Option<&[u8]>) -> io::Result<()>;
}

/// One owner's files in memory: path -> (bytes, last written).
type OwnerFiles = BTreeMap<String, (Vec<u8>, SystemTime)>;

/// Files in the gateway's memory: lost on restart, seen by this process only.
#[derive(Default)]
pub(crate) struct MemoryStore {
    files: Mutex<HashMap<String, OwnerFiles>>,
    /// (owner, path) -> what the file carries.
    tags: Mutex<HashMap<(String, String), Vec<u8>>>,
}

impl WorkspaceStore for MemoryStore {
    fn list(&self, owner: &str) -> io::Result<Vec<FileMeta>> {
        let files = self.files.lock().expect("workspace");
        Ok(files.get(owner).map_or_else(Vec::new, |m| {
            m.iter()
                .map(|(path, (data, modified))| FileMeta {
                    path: path.clone(),
                    bytes: data.len() as u64,
                    modified: *modified,
                })
                .collect()
        }))
    }

    fn read(&self, owner: &str, path: &str) -> io::Result<Option<Vec<u8>>> {
        let files = self.files.lock().expect("workspace");
        Ok(files
            .get(owner)
            .and_then(|m| m.get(path))
            .map(|(d, _)| d.clone()))
    }

    fn write(&self, owner: &str, path: &str, data: &[u8]) -> io::Result<()> {
        let mut files = self.files.lock().expect("workspace");
        files
            .entry(owner.to_string())
            .or_default()
            .insert(path.to_string(), (data.to_vec(), SystemTime::now()));
        Ok(())
    }

    fn remove(&self, owner: &str, path: &str) -> io::Result<bool> {
        let mut files = self.files.lock().expect("workspace");
        let Some(m) = files.get_mut(owner) else {
            return Ok(false);
        };
        let had = m.remove(path).is_some();
        if m.is_empty() {
            files.remove(owner);
        }
        let key = (owner.to_string(), path.to_string());
        self.tags.lock().expect("workspace tags").remove(&key);
        Ok(had)
    }

    fn tags(&self, owner: &str, path: &str) -> io::Result<Option<Vec<u8>>> {
        let key = (owner.to_string(), path.to_string());
        Ok(self.tags.lock().expect("workspace tags").get(&key).cloned())
    }

    fn set_tags(&self, owner: &str, path: &str, tags: Option<&[u8]>) -> io::Result<()> {
        let key = (owner.to_string(), path.to_string());
        let mut all = self.tags.lock().expect("workspace tags");
        match tags {
            Some(t) => all.insert(key, t.to_vec()),
            None => all.remove(&key),
        };
        Ok(())
    }

    fn owners(&self) -> io::Result<Vec<String>> {
        let mut v: Vec<String> = self
            .files
            .lock()
            .expect("workspace")
            .keys()
            .cloned()
            .collect();
        v.sort();
        Ok(v)
    }
}

/// Files under a directory: `<dir>/<owner, %-encoded>/<path>`. Writes go to a temporary
/// file first and are renamed into place, so a reader never sees half a file. Files are
/// created 0600 and folders 0700 (the gateway's user only). Below `<dir>` nothing follows
/// a symbolic link: every folder on a path is checked to be a real folder, and files are
/// opened with `O_NOFOLLOW`, so a link placed in a principal's folder cannot lead a read,
/// a write or a removal out of the workspace ([`LinkRefused`]).
pub(crate) struct DirStore {
    dir: PathBuf,
}

impl DirStore {
    pub(crate) fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// What files carry, kept in a tree of their own beside the owners' folders (a dot
    /// name: never an owner, never a program's path).
    fn tag_store(&self) -> DirStore {
        DirStore::new(self.dir.join(TAGS))
    }

    fn owner_dir(&self, owner: &str) -> PathBuf {
        self.dir.join(encode(owner))
    }

    /// `path`'s file, every folder from the owner's down to its parent a real folder (made,
    /// 0700, when `create`); `None` when one is missing and not made. A link on the way,
    /// or the file itself a link, is refused.
    fn checked(&self, owner: &str, path: &str, create: bool) -> io::Result<Option<PathBuf>> {
        if create {
            // The operator's folder itself may be anywhere (a link there is theirs).
            std::fs::create_dir_all(&self.dir)?;
        }
        let mut dir = self.owner_dir(owner);
        let parts: Vec<&str> = path.split('/').collect();
        let (name, folders) = parts.split_last().expect("split gives one part at least");
        let mut shown = String::new();
        for folder in std::iter::once(None).chain(folders.iter().map(Some)) {
            if let Some(f) = folder {
                dir.push(f);
                shown.push_str(f);
                shown.push('/');
            }
            match dir.symlink_metadata() {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(LinkRefused::io(&shown)),
                Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                    use std::os::unix::fs::DirBuilderExt;
                    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(e),
                    }
                    // Made by someone else between the two steps: check it again.
                    if !dir.symlink_metadata()?.is_dir() {
                        return Err(LinkRefused::io(&shown));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        let file = dir.join(name);
        match file.symlink_metadata() {
            Ok(m) if m.file_type().is_symlink() => Err(LinkRefused::io(&format!("{shown}{name}"))),
            _ => Ok(Some(file)),
        }
    }
}

/// The folder under a [`DirStore`]'s that holds what each file carries.
const TAGS: &str = ".flows";

/// A workspace path that goes through a symbolic link (or a file where a folder should
/// be): refused, since links inside the workspace are not followed.
#[derive(Debug)]
pub(crate) struct LinkRefused(pub String);

impl LinkRefused {
    fn io(shown: &str) -> io::Error {
        io::Error::other(Self(format!(
            "./workspace/{} is a symbolic link or not a folder: the workspace does not follow links (one was placed in this principal's folder); the operator can remove it",
            shown.trim_end_matches('/')
        )))
    }
}

impl std::fmt::Display for LinkRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LinkRefused {}

/// Opens `file` for reading without following a link in its last component.
fn open_nofollow(file: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(file)
}

/// An owner as one safe file name: letters, digits, `-`, `_` and `.` kept, the rest `%XX`.
fn encode(owner: &str) -> String {
    let mut out = String::new();
    for b in owner.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' => out.push(b as char),
            b'.' if !out.is_empty() => out.push('.'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn decode(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Regular files under `dir` (symbolic links and anything else are not workspace files).
fn walk(root: &Path, dir: &Path, out: &mut Vec<FileMeta>) -> io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let meta = entry.path().symlink_metadata()?;
        if meta.is_dir() {
            walk(root, &entry.path(), out)?;
        } else if meta.is_file() {
            let rel = entry.path();
            let rel = rel.strip_prefix(root).unwrap_or(&rel);
            let parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.push(FileMeta {
                path: parts.join("/"),
                bytes: meta.len(),
                modified: meta.modified()?,
            });
        }
    }
    Ok(())
}

impl WorkspaceStore for DirStore {
    fn list(&self, owner: &str) -> io::Result<Vec<FileMeta>> {
        let root = self.owner_dir(owner);
        if root.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
            return Err(LinkRefused::io(""));
        }
        let mut out = Vec::new();
        walk(&root, &root, &mut out)?;
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    fn read(&self, owner: &str, path: &str) -> io::Result<Option<Vec<u8>>> {
        let Some(file) = self.checked(owner, path, false)? else {
            return Ok(None);
        };
        match open_nofollow(&file) {
            Ok(mut f) if f.metadata()?.is_file() => {
                let mut data = Vec::new();
                io::Read::read_to_end(&mut f, &mut data)?;
                Ok(Some(data))
            }
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            // ELOOP: the file became a link after the check.
            Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => Err(LinkRefused::io(path)),
            Err(e) => Err(e),
        }
    }

    fn write(&self, owner: &str, path: &str, data: &[u8]) -> io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let file = self
            .checked(owner, path, true)?
            .expect("folders are made when missing");
        let tmp_dir = self.dir.join(".tmp");
        match std::fs::DirBuilder::new().mode(0o700).create(&tmp_dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let tmp = tmp_dir.join(format!("{:032x}", rand::random::<u128>()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&tmp)
            .and_then(|mut f| io::Write::write_all(&mut f, data));
        // rename replaces a link at `file` itself, never what it points to.
        written
            .and_then(|()| std::fs::rename(&tmp, &file))
            .inspect_err(|_| {
                let _ = std::fs::remove_file(&tmp);
            })
    }

    fn tags(&self, owner: &str, path: &str) -> io::Result<Option<Vec<u8>>> {
        self.tag_store().read(owner, path)
    }

    fn set_tags(&self, owner: &str, path: &str, tags: Option<&[u8]>) -> io::Result<()> {
        match tags {
            Some(t) => self.tag_store().write(owner, path, t),
            None => self.tag_store().remove(owner, path).map(drop),
        }
    }

    fn remove(&self, owner: &str, path: &str) -> io::Result<bool> {
        if !self.dir.ends_with(TAGS) {
            self.tag_store().remove(owner, path)?;
        }
        let file = match self.checked(owner, path, false) {
            Ok(Some(file)) => file,
            Ok(None) => return Ok(false),
            Err(e) => return Err(e),
        };
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        }
        // Empty folders left behind go too, up to the owner's own.
        let root = self.owner_dir(owner);
        let mut dir = file.parent();
        while let Some(d) = dir.filter(|d| d.starts_with(&root)) {
            if std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
        Ok(true)
    }

    fn owners(&self) -> io::Result<Vec<String>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !entry.file_type()?.is_dir() {
                continue;
            }
            out.extend(decode(&name));
        }
        out.sort();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exercise(store: &dyn WorkspaceStore) {
        assert_eq!(store.list("key:ci").unwrap(), vec![]);
        store.write("key:ci", "leads.csv", b"a,b\n").unwrap();
        store.write("key:ci", "runs/1.json", b"{}").unwrap();
        store.write("local", "x", b"1").unwrap();
        store.write("key:ci", "leads.csv", b"a,b\n1,2\n").unwrap();
        let paths: Vec<_> = store
            .list("key:ci")
            .unwrap()
            .into_iter()
            .map(|f| (f.path, f.bytes))
            .collect();
        assert_eq!(
            paths,
            vec![("leads.csv".to_string(), 8), ("runs/1.json".to_string(), 2)]
        );
        assert_eq!(
            store.read("key:ci", "leads.csv").unwrap().as_deref(),
            Some(&b"a,b\n1,2\n"[..])
        );
        assert_eq!(store.read("local", "leads.csv").unwrap(), None);
        assert_eq!(store.owners().unwrap(), vec!["key:ci", "local"]);
        assert!(store.remove("key:ci", "runs/1.json").unwrap());
        assert!(!store.remove("key:ci", "runs/1.json").unwrap());
        assert!(store.remove("local", "x").unwrap());
        assert_eq!(store.owners().unwrap(), vec!["key:ci"]);
        // What a file carries is kept beside it and goes with it.
        store.set_tags("key:ci", "t/a.txt", Some(b"[1]")).unwrap();
        store.write("key:ci", "t/a.txt", b"x").unwrap();
        assert_eq!(
            store.tags("key:ci", "t/a.txt").unwrap().as_deref(),
            Some(&b"[1]"[..])
        );
        assert_eq!(store.list("key:ci").unwrap().len(), 2, "tags are not files");
        assert_eq!(store.owners().unwrap(), vec!["key:ci"], "nor owners");
        assert!(store.remove("key:ci", "t/a.txt").unwrap());
        assert_eq!(store.tags("key:ci", "t/a.txt").unwrap(), None);
    }

    #[test]
    fn a_link_in_an_owners_folder_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"theirs").unwrap();
        let store = DirStore::new(dir.path());
        store.write("a", "mine", b"1").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("a").join("out")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret"),
            dir.path().join("a").join("ln"),
        )
        .unwrap();
        let refused = |e: io::Error| e.get_ref().is_some_and(|e| e.is::<LinkRefused>());
        assert!(refused(store.write("a", "out/x", b"2").unwrap_err()));
        assert!(refused(store.write("a", "ln", b"2").unwrap_err()));
        assert!(refused(store.read("a", "out/secret").unwrap_err()));
        assert!(refused(store.read("a", "ln").unwrap_err()));
        assert!(refused(store.remove("a", "out/secret").unwrap_err()));
        assert_eq!(
            std::fs::read(outside.path().join("secret")).unwrap(),
            b"theirs"
        );
        assert!(!outside.path().join("x").exists());
        let names: Vec<String> = store
            .list("a")
            .unwrap()
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(names, ["mine"], "listings skip links");
    }

    #[test]
    fn both_stores_keep_files_per_owner() {
        exercise(&MemoryStore::default());
        let dir = tempfile::tempdir().unwrap();
        exercise(&DirStore::new(dir.path()));
        // On disk, owners are one safe folder name each.
        assert!(dir.path().join("key%3Aci").join("leads.csv").is_file());
        // A second store over the same folder (a restarted gateway) sees the same files.
        let again = DirStore::new(dir.path());
        assert!(again.read("key:ci", "leads.csv").unwrap().is_some());
    }

    #[test]
    fn owner_names_round_trip() {
        for o in ["key:ci", "local", "session:ab-12", "key:../x", ".hidden"] {
            let e = encode(o);
            assert!(!e.contains('/') && !e.starts_with('.'), "{e}");
            assert_eq!(decode(&e).as_deref(), Some(o));
        }
    }
}
