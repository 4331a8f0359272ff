//! Skills: operator-reviewed programs kept as folders `<skills_dir>/<name>/` with a
//! `SKILL.md` (YAML front matter: name, description, input schema, the servers it needs;
//! the markdown body is documentation) and a `skill.js` run as a code-mode program.
//! Route finds them like tools of the reserved server `skills`; execute and
//! `await skills.run(name, input)` run them with the caller's authorization.
//!
//! - [`manifest`]: one skill folder read and checked (clear errors naming the file).
//! - [`library`]: the skills folder, re-read when it changes; bad skills are reported, the
//!   rest keep working.
//! - `error`: why a skill folder did not load ([`LoadError`]), an input schema is refused
//!   ([`SchemaRefusal`]) or a draft was not written, approved or rejected ([`DraftError`]).
//! - [`drafts`]: skills models propose (written by the gateway, never by a program) wait
//!   in `<skills_dir>/.drafts/` until an operator approves or rejects them.
//!
//! Running a skill is `programs::skill`; proposing one is `guided::propose`.

pub mod drafts;
mod error;
pub(crate) mod library;
pub(crate) mod manifest;

pub use error::{DraftError, LoadError, Problem, SchemaRefusal};
pub(crate) use library::SkillLibrary;
pub use library::SkillSet;
pub use manifest::Skill;

/// The server name skills are found under (`skills/<name>`); no upstream may take it while
/// skills are configured.
pub(crate) const SKILLS_SERVER: &str = toolgate_sandbox::protocol::SKILLS_SERVER;
/// Where drafts wait, inside the skills folder (a dot name: never a skill).
pub(crate) const DRAFTS_DIR: &str = ".drafts";
/// The longest description (route ranks by it; the model reads it).
pub(crate) const MAX_DESCRIPTION: usize = 1024;
/// Servers one skill may name.
pub(crate) const MAX_SERVERS: usize = 16;
/// The front matter's file and the program's file in a skill folder.
pub const SKILL_MD: &str = "SKILL.md";
/// The program's file in a skill folder.
pub const SKILL_JS: &str = "skill.js";

/// A skill name is a folder name and a route name: a simple name (see
/// [`toolgate_core::ids::is_simple_name`]) that does not start with a dot, so it is never `.`,
/// `..` or a hidden folder such as `.drafts`.
pub fn is_skill_name(name: &str) -> bool {
    toolgate_core::ids::is_simple_name(name) && !name.starts_with('.')
}

/// What a bad skill name is told.
pub fn name_rule(name: &str) -> String {
    format!(
        "{name:?} is not a skill name: use 1 to 48 letters, digits, '_', '-' or '.', not starting with '.'"
    )
}

/// A throwaway folder under the system's temp dir, for tests (no dev-dependency needed).
#[cfg(test)]
pub(crate) struct TempDir(pub std::path::PathBuf);

#[cfg(test)]
impl TempDir {
    pub(crate) fn new() -> Self {
        let p = std::env::temp_dir().join(format!(
            "toolgate-skill-{}",
            toolgate_core::ids::random_hex(6)
        ));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

#[cfg(test)]
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_walk_out_of_the_folder() {
        assert!(is_skill_name("weekly-report"));
        assert!(is_skill_name("v1.2"));
        for bad in [
            "",
            ".",
            "..",
            ".drafts",
            "a/b",
            "../x",
            "a b",
            &"x".repeat(49),
        ] {
            assert!(!is_skill_name(bad), "{bad:?}");
        }
    }
}
