//! The workspace: files a principal's programs keep between runs (`fs.readFile`,
//! `fs.writeFile`, `fs.readdir`, `fs.rm` over `./workspace/...`), so a later run can read
//! back what an earlier one wrote and resume. One workspace per principal ([`principal`]),
//! shared by its sessions; bounded by `[code.workspace]` quotas; a file not written for
//! `expiry` is forgotten. The bytes live in a [`store::WorkspaceStore`].
//!
//! `./servers/...` (the tool tree) goes through the same `fs` calls; see `code::tree`.

pub mod paths;
pub(crate) mod store;

use crate::code::flows::{Carried, RunFlows};
use crate::config::code::WorkspaceConfig;
use paths::{Checked, Tree};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::SystemTime;
use store::{DirStore, FileMeta, MemoryStore, WorkspaceStore};
use toolgate_sandbox::protocol::CallFailure;

/// Every principal's files, within the configured quotas.
pub struct Workspace {
    store: Arc<dyn WorkspaceStore>,
    limits: WorkspaceConfig,
}

pub(crate) fn fail(code: &str, message: impl Into<String>) -> CallFailure {
    CallFailure {
        code: code.into(),
        message: message.into(),
    }
}

fn io_fail(e: std::io::Error) -> CallFailure {
    if let Some(link) = e
        .get_ref()
        .and_then(|e| e.downcast_ref::<store::LinkRefused>())
    {
        tracing::warn!("workspace store: {link}");
        return fail("denied", link.to_string());
    }
    tracing::warn!("workspace store: {e}");
    fail("upstream", format!("the workspace store failed: {e}"))
}

impl Workspace {
    /// The store `limits` names: its `dir`, else memory.
    pub fn new(limits: &WorkspaceConfig) -> Self {
        let store: Arc<dyn WorkspaceStore> = match &limits.dir {
            Some(dir) => Arc::new(DirStore::new(dir)),
            None => Arc::new(MemoryStore::default()),
        };
        Self::with_store(store, limits)
    }

    /// A workspace over `store` (tests and the CLI give their own), with the limits of `limits`.
    pub fn with_store(store: Arc<dyn WorkspaceStore>, limits: &WorkspaceConfig) -> Self {
        Self {
            store,
            limits: limits.clone(),
        }
    }

    /// `owner`'s files that have not expired (expired ones are removed on the way).
    pub fn files(&self, owner: &str) -> Result<Vec<FileMeta>, CallFailure> {
        let now = SystemTime::now();
        let mut live = Vec::new();
        for f in self.store.list(owner).map_err(io_fail)? {
            let age = now.duration_since(f.modified).unwrap_or_default();
            if age > self.limits.expiry {
                self.store.remove(owner, &f.path).map_err(io_fail)?;
            } else {
                live.push(f);
            }
        }
        Ok(live)
    }

    /// Principals with files (for the operator).
    pub fn owners(&self) -> Result<Vec<String>, CallFailure> {
        self.store.owners().map_err(io_fail)
    }

    /// Answers one `fs` operation on a `./workspace` path. With `flows` (a run's, when
    /// `[code.flows]` rules exist), a file written keeps beside it the PII values of the run
    /// it holds and where they came from, and a file read gives them to the run reading it.
    pub fn request(
        &self,
        owner: &str,
        op: &str,
        path: &Checked,
        args: &Value,
        flows: Option<&RunFlows>,
    ) -> Result<Value, CallFailure> {
        debug_assert_eq!(path.tree, Tree::Workspace);
        let rel = path.rel();
        let shown = format!("./workspace/{rel}");
        match op {
            "readFile" => match self.read(owner, &rel)? {
                Some(text) => {
                    if let Some(flows) = flows {
                        let tags = self.store.tags(owner, &rel).map_err(io_fail)?;
                        let carried = tags
                            .and_then(|t| serde_json::from_slice(&t).ok())
                            .unwrap_or_default();
                        flows.adopt(carried);
                    }
                    Ok(Value::String(text))
                }
                None => Err(fail(
                    "not_found",
                    format!("there is no file {shown} (fs.readdir(\"./workspace\") lists what there is)"),
                )),
            },
            "writeFile" => {
                let Some(data) = args.get("data").and_then(Value::as_str) else {
                    return Err(fail(
                        "invalid_arguments",
                        "fs.writeFile(path, data) takes data as a string: JSON.stringify a value first",
                    ));
                };
                if rel.is_empty() {
                    return Err(fail("invalid_arguments", "fs.writeFile needs a file name: ./workspace/<name>"));
                }
                let carried = flows.map(|f| f.carried(&Value::String(data.into())));
                if flows.is_some_and(|f| !f.carried(&Value::String(rel.clone())).is_empty()) {
                    return Err(fail(
                        "denied",
                        format!("{shown}: a file name may not hold a PII value a tool returned; name the file otherwise and put the value inside"),
                    ));
                }
                self.write(owner, &rel, data, carried.unwrap_or_default())?;
                Ok(Value::Null)
            }
            "readdir" => {
                let files = self.files(owner)?;
                let prefix = if rel.is_empty() { String::new() } else { format!("{rel}/") };
                let names: BTreeSet<&str> = files
                    .iter()
                    .filter_map(|f| f.path.strip_prefix(prefix.as_str()))
                    .map(|rest| rest.split('/').next().unwrap_or(rest))
                    .collect();
                if names.is_empty() && !rel.is_empty() {
                    return Err(fail("not_found", format!("there is no folder {shown}")));
                }
                Ok(json!(names))
            }
            "rm" => {
                // A file, or a folder and everything in it; the workspace root empties it.
                let prefix = format!("{rel}/");
                let mut removed = 0;
                for f in self.files(owner)? {
                    if rel.is_empty() || f.path == rel || f.path.starts_with(&prefix) {
                        removed += u64::from(self.store.remove(owner, &f.path).map_err(io_fail)?);
                    }
                }
                Ok(json!(removed))
            }
            _ => Err(fail("invalid_arguments", format!("there is no fs.{op}"))),
        }
    }

    /// A file's text, unless it expired.
    pub fn read(&self, owner: &str, rel: &str) -> Result<Option<String>, CallFailure> {
        if !self.files(owner)?.iter().any(|f| f.path == rel) {
            return Ok(None);
        }
        let Some(bytes) = self.store.read(owner, rel).map_err(io_fail)? else {
            return Ok(None);
        };
        Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
    }

    fn write(
        &self,
        owner: &str,
        rel: &str,
        data: &str,
        carried: Vec<Carried>,
    ) -> Result<(), CallFailure> {
        let l = &self.limits;
        if data.len() > l.max_file_bytes {
            return Err(fail(
                "limit",
                format!(
                    "a workspace file is at most {} bytes (code.workspace.max_file_bytes); this one is {}: split it",
                    l.max_file_bytes,
                    data.len()
                ),
            ));
        }
        let files = self.files(owner)?;
        let others: Vec<&FileMeta> = files.iter().filter(|f| f.path != rel).collect();
        // A file and a folder cannot share a name.
        let as_folder = format!("{rel}/");
        if let Some(clash) = others
            .iter()
            .find(|f| f.path.starts_with(&as_folder) || rel.starts_with(&format!("{}/", f.path)))
        {
            return Err(fail(
                "invalid_arguments",
                format!("./workspace/{rel} clashes with ./workspace/{}: a name is a file or a folder, not both", clash.path),
            ));
        }
        if others.len() >= l.max_files {
            return Err(fail(
                "limit",
                format!(
                    "the workspace holds at most {} files (code.workspace.max_files): fs.rm some first",
                    l.max_files
                ),
            ));
        }
        let total: u64 = others.iter().map(|f| f.bytes).sum::<u64>() + data.len() as u64;
        if total > l.max_bytes {
            return Err(fail(
                "limit",
                format!(
                    "the workspace holds at most {} bytes (code.workspace.max_bytes); with this file it would hold {total}: fs.rm some first",
                    l.max_bytes
                ),
            ));
        }
        // What the file carries is written first: a file never holds a value without it.
        let tags = (!carried.is_empty())
            .then(|| serde_json::to_vec(&carried).expect("plain values serialize"));
        self.store
            .set_tags(owner, rel, tags.as_deref())
            .map_err(io_fail)?;
        self.store
            .write(owner, rel, data.as_bytes())
            .map_err(io_fail)
    }

    /// Removes one of `owner`'s files or, with `rel` empty, all of them (the operator's
    /// `toolgate workspace rm`); how many went.
    pub fn remove(&self, owner: &str, rel: &str) -> Result<u64, CallFailure> {
        let path = Checked {
            tree: Tree::Workspace,
            parts: rel
                .split('/')
                .filter(|p| !p.is_empty())
                .map(String::from)
                .collect(),
        };
        self.request(owner, "rm", &path, &Value::Null, None)
            .map(|v| v.as_u64().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ws(limits: WorkspaceConfig) -> Workspace {
        Workspace::new(&limits)
    }

    fn op(
        w: &Workspace,
        owner: &str,
        op: &str,
        path: &str,
        data: Option<&str>,
    ) -> Result<Value, CallFailure> {
        let checked = paths::check(path).unwrap();
        w.request(
            owner,
            op,
            &checked,
            &json!({"path": path, "data": data}),
            None,
        )
    }

    #[test]
    fn files_are_written_listed_read_and_removed_per_owner() {
        let w = ws(WorkspaceConfig::default());
        op(&w, "a", "writeFile", "./workspace/leads.csv", Some("x,y\n")).unwrap();
        op(&w, "a", "writeFile", "./workspace/runs/1.json", Some("{}")).unwrap();
        assert_eq!(
            op(&w, "a", "readdir", "./workspace", None).unwrap(),
            json!(["leads.csv", "runs"])
        );
        assert_eq!(
            op(&w, "a", "readdir", "./workspace/runs", None).unwrap(),
            json!(["1.json"])
        );
        assert_eq!(
            op(&w, "a", "readFile", "workspace/leads.csv", None).unwrap(),
            json!("x,y\n")
        );
        assert_eq!(
            op(&w, "b", "readFile", "./workspace/leads.csv", None)
                .unwrap_err()
                .code,
            "not_found"
        );
        assert_eq!(
            op(&w, "a", "readdir", "./workspace/none", None)
                .unwrap_err()
                .code,
            "not_found"
        );
        assert_eq!(
            op(&w, "a", "writeFile", "./workspace/runs", Some(""))
                .unwrap_err()
                .code,
            "invalid_arguments"
        );
        assert_eq!(
            op(&w, "a", "writeFile", "./workspace/x", None)
                .unwrap_err()
                .code,
            "invalid_arguments"
        );
        assert_eq!(
            op(&w, "a", "rm", "./workspace/runs", None).unwrap(),
            json!(1)
        );
        assert_eq!(op(&w, "a", "rm", "./workspace", None).unwrap(), json!(1));
        assert_eq!(
            op(&w, "a", "readdir", "./workspace", None).unwrap(),
            json!([])
        );
    }

    #[test]
    fn quotas_refuse_with_limit_and_name_the_key() {
        let w = ws(WorkspaceConfig {
            max_files: 2,
            max_bytes: 10,
            max_file_bytes: 6,
            ..WorkspaceConfig::default()
        });
        let e = op(&w, "a", "writeFile", "./workspace/big", Some("1234567")).unwrap_err();
        assert!(
            e.code == "limit" && e.message.contains("max_file_bytes"),
            "{e:?}"
        );
        op(&w, "a", "writeFile", "./workspace/a", Some("123456")).unwrap();
        let e = op(&w, "a", "writeFile", "./workspace/b", Some("12345")).unwrap_err();
        assert!(e.message.contains("max_bytes"), "{e:?}");
        op(&w, "a", "writeFile", "./workspace/b", Some("1")).unwrap();
        let e = op(&w, "a", "writeFile", "./workspace/c", Some("1")).unwrap_err();
        assert!(e.message.contains("max_files"), "{e:?}");
        // Replacing a file is not one more.
        op(&w, "a", "writeFile", "./workspace/a", Some("12")).unwrap();
    }

    #[test]
    fn expired_files_are_gone() {
        let w = ws(WorkspaceConfig {
            expiry: Duration::ZERO,
            ..WorkspaceConfig::default()
        });
        op(&w, "a", "writeFile", "./workspace/a", Some("1")).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            op(&w, "a", "readFile", "./workspace/a", None)
                .unwrap_err()
                .code,
            "not_found"
        );
        assert_eq!(w.owners().unwrap(), Vec::<String>::new());
    }
}
