//! Drafts: skills a model proposed from a finished run, waiting in
//! `<skills_dir>/.drafts/<name>/` until an operator approves (moves it beside the served
//! skills) or rejects (deletes) it. The gateway process writes drafts from what it kept of
//! the run; nothing a program can reach writes here.

use super::error::{DraftError, LoadError};
use super::library::SkillSet;
use super::manifest::{self, FrontMatter, Skill};
use super::{is_skill_name, name_rule, DRAFTS_DIR, SKILL_JS, SKILL_MD};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Drafts waiting at most: past this, proposals are refused until an operator catches up.
pub(crate) const MAX_DRAFTS: usize = 100;

/// A proposal, as `propose_skill` hands it over.
pub(crate) struct Proposal<'a> {
    /// The skill's name (its folder).
    pub name: &'a str,
    /// What it does, for route and the operator.
    pub description: &'a str,
    /// The upstreams its program calls.
    pub servers: Vec<String>,
    /// Its input's JSON Schema.
    pub input_schema: Value,
    /// The program (`skill.js`).
    pub code: &'a str,
    /// Where it came from (run id, key), for the operator reading it.
    pub provenance: String,
}

/// The folder where drafts wait, inside the skills folder.
pub fn drafts_dir(skills: &Path) -> PathBuf {
    skills.join(DRAFTS_DIR)
}

/// Writes a draft; returns its folder. The draft is checked as a skill would be before
/// anything is written, and it appears whole or not at all (written aside, then renamed).
pub(crate) fn write(
    skills: &Path,
    p: &Proposal<'_>,
    max_source: usize,
) -> Result<PathBuf, DraftError> {
    if !is_skill_name(p.name) {
        return Err(DraftError::Name(name_rule(p.name)));
    }
    if skills.join(p.name).exists() {
        return Err(DraftError::Approved(p.name.to_string()));
    }
    let drafts = drafts_dir(skills);
    let target = drafts.join(p.name);
    if target.exists() {
        return Err(DraftError::Waiting(p.name.to_string()));
    }
    let waiting = list_drafts(skills).len();
    if waiting >= MAX_DRAFTS {
        return Err(DraftError::TooMany(waiting));
    }
    let front = FrontMatter {
        name: p.name.to_string(),
        description: p.description.trim().to_string(),
        servers: p.servers.clone(),
        input_schema: Some(p.input_schema.clone()),
        license: None,
        metadata: None,
    };
    let yaml = serde_yaml_ng::to_string(&front).map_err(DraftError::FrontMatter)?;
    let md = format!(
        "---\n{yaml}---\n# {name}\n\nA draft proposed by a model ({}). Review skill.js before approving: it runs with the\ncaller's authorization, calling only tools of the servers listed above.\n\n    toolgate skill approve {name}\n    toolgate skill reject {name}\n",
        p.provenance,
        name = p.name
    );
    std::fs::create_dir_all(&drafts).map_err(|e| DraftError::CreateDir {
        dir: drafts.clone(),
        source: e,
    })?;
    // Written aside under a dot folder (never listed), checked, then renamed into place.
    let aside = drafts.join(format!(".new-{}", toolgate_core::ids::random_hex(6)));
    let folder = aside.join(p.name);
    let result = std::fs::create_dir_all(&folder)
        .and_then(|()| std::fs::write(folder.join(SKILL_MD), &md))
        .and_then(|()| std::fs::write(folder.join(SKILL_JS), p.code))
        .map_err(DraftError::Write)
        .and_then(|()| manifest::load(&folder, max_source).map_err(DraftError::Invalid))
        .and_then(|_| std::fs::rename(&folder, &target).map_err(DraftError::Write));
    let _ = std::fs::remove_dir_all(&aside);
    result.map(|()| target)
}

/// Every draft folder's name and what loading it gives.
pub fn list_drafts(skills: &Path) -> Vec<(String, Result<Skill, LoadError>)> {
    let drafts = drafts_dir(skills);
    let mut names: Vec<String> = std::fs::read_dir(&drafts)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| is_skill_name(n))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let loaded = manifest::load(&drafts.join(&n), usize::MAX);
            (n, loaded)
        })
        .collect()
}

/// The served skills of a folder (for the CLI).
pub fn list_approved(skills: &Path) -> SkillSet {
    SkillSet::scan(skills, usize::MAX)
}

/// The folder of draft `name`, refusing names that could point anywhere else and
/// anything that is not a real folder (a symlink is refused).
fn draft_folder(skills: &Path, name: &str) -> Result<PathBuf, DraftError> {
    if !is_skill_name(name) {
        return Err(DraftError::Name(name_rule(name)));
    }
    let dir = drafts_dir(skills).join(name);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(dir),
        Ok(_) => Err(DraftError::NotAFolder(dir)),
        Err(_) => Err(DraftError::NoDraft {
            name: name.to_string(),
            drafts: drafts_dir(skills),
        }),
    }
}

/// Moves draft `name` beside the served skills, after checking it loads; an approved
/// skill of that name is never overwritten.
pub fn approve(skills: &Path, name: &str, max_source: usize) -> Result<PathBuf, DraftError> {
    let from = draft_folder(skills, name)?;
    manifest::load(&from, max_source).map_err(DraftError::DoesNotLoad)?;
    let to = skills.join(name);
    if std::fs::symlink_metadata(&to).is_ok() {
        return Err(DraftError::Exists(to));
    }
    if let Err(e) = std::fs::rename(&from, &to) {
        return Err(DraftError::Move { from, source: e });
    }
    Ok(to)
}

/// Deletes draft `name`.
pub fn reject(skills: &Path, name: &str) -> Result<(), DraftError> {
    let dir = draft_folder(skills, name)?;
    std::fs::remove_dir_all(&dir).map_err(|e| DraftError::Remove { dir, source: e })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn proposal<'a>(name: &'a str, code: &'a str) -> Proposal<'a> {
        Proposal {
            name,
            description: "Say: what it does\n---\nname: injected",
            servers: vec!["alpha".into()],
            input_schema: json!({"type": "object", "properties": {"x": {"type": "string"}}}),
            code,
            provenance: "run run-1".into(),
        }
    }

    #[test]
    fn a_draft_is_written_whole_then_approved_never_over_a_skill() {
        let d = super::super::TempDir::new();
        let dir = &d.0;
        let folder = write(dir, &proposal("s1", "return input.x"), 1000).unwrap();
        let skill = manifest::load(&folder, 1000).unwrap();
        assert_eq!(skill.name, "s1");
        assert!(
            skill.description.contains("---\nname: injected"),
            "front matter is quoted"
        );
        assert_eq!(skill.input_schema["properties"]["x"]["type"], "string");
        assert_eq!(skill.code, "return input.x");
        // Only the draft itself is left in .drafts (the aside folder is gone).
        let names: Vec<_> = std::fs::read_dir(drafts_dir(dir))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("s1")]);
        assert!(write(dir, &proposal("s1", "return 2"), 1000)
            .unwrap_err()
            .to_string()
            .contains("already waits"));
        assert!(write(dir, &proposal("big", &"x".repeat(2000)), 1000).is_err());
        assert!(!drafts_dir(dir).join("big").exists());

        approve(dir, "s1", 1000).unwrap();
        assert!(dir.join("s1").join(SKILL_JS).exists());
        assert_eq!(list_approved(dir).skills.len(), 1);
        assert!(write(dir, &proposal("s1", "return 3"), 1000)
            .unwrap_err()
            .to_string()
            .contains("already approved"));
        // A hand-made draft of the same name is not approved over the served skill.
        std::fs::create_dir_all(drafts_dir(dir).join("s1")).unwrap();
        std::fs::copy(
            dir.join("s1").join(SKILL_MD),
            drafts_dir(dir).join("s1").join(SKILL_MD),
        )
        .unwrap();
        std::fs::write(drafts_dir(dir).join("s1").join(SKILL_JS), "return 'other'").unwrap();
        assert!(approve(dir, "s1", 1000)
            .unwrap_err()
            .to_string()
            .contains("never overwritten"));
        assert_eq!(
            std::fs::read_to_string(dir.join("s1").join(SKILL_JS)).unwrap(),
            "return input.x"
        );
        reject(dir, "s1").unwrap();
        assert!(list_drafts(dir).is_empty());
        for bad in ["..", "../s1", ".drafts", "a/b"] {
            assert!(
                approve(dir, bad, 1000).is_err() && reject(dir, bad).is_err(),
                "{bad}"
            );
        }
        assert!(
            dir.join("s1").exists(),
            "rejecting never touches a served skill"
        );
    }
}
