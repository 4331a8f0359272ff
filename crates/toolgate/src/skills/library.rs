//! The skills folder as the gateway serves it: a snapshot ([`SkillSet`]) re-read when the
//! folder changes, so an approved skill is served without a restart.
//!
//! Checking for a change costs one directory listing and two `stat`s per skill, done at
//! most once per [`RECHECK`] and only when someone asks (route, execute, a program's
//! `skills.run`); an unchanged folder keeps the same snapshot, so the route index is not
//! rebuilt.

use super::manifest::{self, Skill};
use super::{SKILL_JS, SKILL_MD};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How often the folder is looked at for changes, at most.
pub(crate) const RECHECK: Duration = Duration::from_millis(500);
/// Skills read from one folder at most (the rest are reported).
pub(crate) const MAX_SKILLS: usize = 1000;

/// The skills of one folder at one moment: the good ones by name, and an error for each
/// bad one (the file and what to fix).
#[derive(Debug, Default)]
pub struct SkillSet {
    /// The skills that loaded, by name.
    pub skills: BTreeMap<String, Arc<Skill>>,
    /// One message per skill that did not (the file and what to fix).
    pub errors: Vec<String>,
}

impl SkillSet {
    /// Reads every skill folder in `dir` (folders whose name starts with `.` are not
    /// skills: `.drafts` lives there). A missing folder holds no skills.
    pub fn scan(dir: &Path, max_source: usize) -> Self {
        let mut set = SkillSet::default();
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return set,
            Err(e) => {
                set.errors.push(format!("{}: {e}", dir.display()));
                return set;
            }
        };
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .filter(|e| e.path().is_dir())
            .map(|e| e.path())
            .collect();
        dirs.sort();
        if dirs.len() > MAX_SKILLS {
            set.errors.push(format!(
                "{}: {} skill folders; only the first {MAX_SKILLS} are read",
                dir.display(),
                dirs.len()
            ));
            dirs.truncate(MAX_SKILLS);
        }
        for d in dirs {
            match manifest::load(&d, max_source) {
                Ok(s) => {
                    set.skills.insert(s.name.clone(), Arc::new(s));
                }
                Err(e) => set.errors.push(e.to_string()),
            }
        }
        set
    }

    /// The skill named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Skill>> {
        self.skills.get(name)
    }
}

/// What identifies the folder's state: each skill folder's name with its two files'
/// modification times and sizes.
type Fingerprint = Vec<(String, Option<(SystemTime, u64)>, Option<(SystemTime, u64)>)>;

fn fingerprint(dir: &Path) -> Fingerprint {
    let stat = |p: PathBuf| {
        std::fs::metadata(p)
            .ok()
            .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
    };
    let mut f: Fingerprint = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .map(|n| {
            let d = dir.join(&n);
            (n, stat(d.join(SKILL_MD)), stat(d.join(SKILL_JS)))
        })
        .collect();
    f.sort();
    f
}

/// The skills folder of a running gateway.
pub(crate) struct SkillLibrary {
    /// `None`: no skills configured (or code mode off); the set stays empty.
    dir: Option<PathBuf>,
    /// Code mode's program size limit, applied to `skill.js`.
    max_source: usize,
    state: Mutex<State>,
}

struct State {
    set: Arc<SkillSet>,
    seen: Option<Fingerprint>,
    checked: Option<Instant>,
}

impl SkillLibrary {
    pub(crate) fn new(dir: Option<PathBuf>, max_source: usize) -> Self {
        Self {
            dir,
            max_source,
            state: Mutex::new(State {
                set: Arc::default(),
                seen: None,
                checked: None,
            }),
        }
    }

    /// Whether skills are configured at all.
    pub(crate) fn configured(&self) -> bool {
        self.dir.is_some()
    }

    pub(crate) fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The current skills; the same `Arc` until the folder changes.
    pub(crate) fn current(&self) -> Arc<SkillSet> {
        let Some(dir) = &self.dir else {
            return self.state.lock().expect("skills").set.clone();
        };
        let mut st = self.state.lock().expect("skills");
        if st.checked.is_some_and(|t| t.elapsed() < RECHECK) {
            return st.set.clone();
        }
        st.checked = Some(Instant::now());
        let now = fingerprint(dir);
        if st.seen.as_ref() != Some(&now) {
            let set = SkillSet::scan(dir, self.max_source);
            for e in &set.errors {
                if !st.set.errors.contains(e) {
                    tracing::warn!("skill skipped: {e}");
                }
            }
            tracing::info!(
                "skills from {}: {} ready, {} skipped",
                dir.display(),
                set.skills.len(),
                set.errors.len()
            );
            st.set = Arc::new(set);
            st.seen = Some(now);
        }
        st.set.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(dir: &Path, name: &str, desc: &str) {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join(SKILL_MD),
            format!("---\nname: {name}\ndescription: {desc}\n---\n"),
        )
        .unwrap();
        std::fs::write(d.join(SKILL_JS), "return 1").unwrap();
    }

    #[test]
    fn the_snapshot_changes_only_when_the_folder_does() {
        let d = super::super::TempDir::new();
        let lib = SkillLibrary::new(Some(d.0.clone()), 1000);
        let empty = lib.current();
        assert!(empty.skills.is_empty() && empty.errors.is_empty());
        put(&d.0, "a", "first");
        std::fs::create_dir_all(d.0.join(".drafts/b")).unwrap();
        lib.state.lock().unwrap().checked = None;
        let one = lib.current();
        assert_eq!(one.skills.keys().collect::<Vec<_>>(), vec!["a"]);
        lib.state.lock().unwrap().checked = None;
        assert!(
            Arc::ptr_eq(&one, &lib.current()),
            "unchanged folder, same snapshot"
        );
        std::fs::create_dir_all(d.0.join("bad")).unwrap();
        std::fs::write(d.0.join("bad").join(SKILL_MD), "nothing").unwrap();
        lib.state.lock().unwrap().checked = None;
        let two = lib.current();
        assert_eq!(two.skills.len(), 1);
        assert!(
            two.errors[0].contains("no front matter"),
            "{:?}",
            two.errors
        );
        assert!(SkillLibrary::new(None, 1000).current().skills.is_empty());
    }
}
