//! Why a skill folder did not load ([`LoadError`], naming the file), why an input schema is
//! refused ([`SchemaRefusal`]) and why a draft was not written, approved or rejected
//! ([`DraftError`]). The messages are what the operator (`toolgate skill`, the log) and the
//! model (`propose_skill`) read.

use super::{MAX_DESCRIPTION, MAX_SERVERS};
use serde_json::Value;
use std::path::PathBuf;
use toolgate_core::exec::SchemaError;

/// A skill folder that did not load: the file, and what to fix in it.
#[derive(Debug)]
pub struct LoadError {
    /// The folder or file at fault.
    pub path: PathBuf,
    /// What is wrong there.
    pub problem: Problem,
}

impl LoadError {
    pub(super) fn at(path: impl Into<PathBuf>, problem: Problem) -> Self {
        Self {
            path: path.into(),
            problem,
        }
    }

    /// A short, stable name of what was wrong (for logs and metrics labels).
    pub fn kind(&self) -> &'static str {
        self.problem.kind()
    }
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.problem)
    }
}

/// The source is the problem's own (an I/O or YAML error), not the problem, whose words
/// the message already holds.
impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.problem)
    }
}

/// What is wrong in a skill folder.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// The folder's name is not a skill name; the text is `name_rule`'s.
    #[error("{0}")]
    FolderName(String),
    /// A file is not there.
    #[error("missing")]
    Missing,
    /// A file could not be read.
    #[error("{0}")]
    Read(#[source] std::io::Error),
    /// A file is larger than its limit.
    #[error("{bytes} bytes; the limit is {limit}")]
    TooLarge {
        /// The file's size.
        bytes: u64,
        /// The most it may have.
        limit: u64,
    },
    /// SKILL.md does not start with front matter.
    #[error("no front matter: start the file with a line `---`, then name, description, servers and input_schema, then a line `---`")]
    NoFrontMatter,
    /// The front matter is not valid YAML of the expected shape.
    #[error("front matter: {0}")]
    FrontMatter(#[source] serde_yaml_ng::Error),
    /// skill.js holds nothing.
    #[error("the program is empty: write the skill's JavaScript here")]
    EmptyProgram,
    /// The front matter's name is not the folder's.
    #[error("name is {name:?} but the folder is {folder:?}: make them the same")]
    NameMismatch {
        /// The name in the front matter.
        name: String,
        /// The folder's name.
        folder: String,
    },
    /// The description is empty or too long.
    #[error("description must be 1 to {MAX_DESCRIPTION} characters (route finds the skill by it)")]
    Description,
    /// More servers than a skill may name.
    #[error("servers: at most {MAX_SERVERS}")]
    TooManyServers,
    /// A server that is no upstream name.
    #[error(
        "servers: {0:?} is not an upstream name (list the upstream servers the program calls)"
    )]
    Server(String),
    /// The input schema is refused.
    #[error("input_schema: {0}")]
    InputSchema(#[source] SchemaRefusal),
}

impl Problem {
    /// A short, stable name of the problem.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::FolderName(_) => "folder_name",
            Self::Missing => "missing",
            Self::Read(_) => "read",
            Self::TooLarge { .. } => "too_large",
            Self::NoFrontMatter => "no_front_matter",
            Self::FrontMatter(_) => "front_matter",
            Self::EmptyProgram => "empty_program",
            Self::NameMismatch { .. } => "name_mismatch",
            Self::Description => "description",
            Self::TooManyServers => "too_many_servers",
            Self::Server(_) => "server",
            Self::InputSchema(_) => "input_schema",
        }
    }
}

/// Why a skill's input schema is refused.
#[derive(Debug, thiserror::Error)]
pub enum SchemaRefusal {
    /// Not a JSON object.
    #[error("must be a JSON Schema object, e.g. {{type: object, properties: {{...}}}}")]
    NotAnObject,
    /// A `type` other than `object`.
    #[error("type is {0}: a skill's input is an object; put the values in its properties")]
    NotObjectType(Value),
    /// It does not compile.
    #[error(transparent)]
    Compile(#[from] SchemaError),
}

/// Why a draft was not written, approved or rejected.
#[derive(Debug, thiserror::Error)]
pub enum DraftError {
    /// Not a skill name; the text is `name_rule`'s.
    #[error("{0}")]
    Name(String),
    /// An approved skill has the name.
    #[error("a skill named {0:?} is already approved: choose another name")]
    Approved(String),
    /// A draft of the name already waits.
    #[error("a draft named {0:?} already waits for review: choose another name")]
    Waiting(String),
    /// Too many drafts wait for review.
    #[error("{0} drafts already wait for an operator's review; propose again after they are approved or rejected")]
    TooMany(usize),
    /// The front matter could not be written as YAML.
    #[error("front matter: {0}")]
    FrontMatter(#[source] serde_yaml_ng::Error),
    /// The drafts folder could not be made.
    #[error("cannot create {}: {source}", .dir.display())]
    CreateDir {
        /// The drafts folder.
        dir: PathBuf,
        /// What making it said.
        source: std::io::Error,
    },
    /// The draft's files could not be written or moved into place.
    #[error("cannot write the draft: {0}")]
    Write(#[source] std::io::Error),
    /// The draft as written does not load as a skill.
    #[error(transparent)]
    Invalid(LoadError),
    /// The draft's path is not a folder (e.g. a symlink).
    #[error("{} is not a folder", .0.display())]
    NotAFolder(PathBuf),
    /// No draft of the name.
    #[error("no draft named {name:?} in {}", .drafts.display())]
    NoDraft {
        /// The name asked for.
        name: String,
        /// The drafts folder.
        drafts: PathBuf,
    },
    /// The draft to approve does not load.
    #[error("the draft does not load: {0}")]
    DoesNotLoad(#[source] LoadError),
    /// An approved skill's folder is in the way.
    #[error("{} already exists: an approved skill is never overwritten by a draft (remove it first, or reject the draft)", .0.display())]
    Exists(PathBuf),
    /// The draft could not be moved beside the served skills.
    #[error("cannot move {}: {source}", .from.display())]
    Move {
        /// The draft's folder.
        from: PathBuf,
        /// What renaming said.
        source: std::io::Error,
    },
    /// The draft could not be deleted.
    #[error("cannot remove {}: {source}", .dir.display())]
    Remove {
        /// The draft's folder.
        dir: PathBuf,
        /// What removing said.
        source: std::io::Error,
    },
}

impl DraftError {
    /// A short, stable name of what went wrong (for logs and metrics labels).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Name(_) => "name",
            Self::Approved(_) => "approved",
            Self::Waiting(_) => "waiting",
            Self::TooMany(_) => "too_many",
            Self::FrontMatter(_) => "front_matter",
            Self::CreateDir { .. } => "create_dir",
            Self::Write(_) => "write",
            Self::Invalid(_) => "invalid",
            Self::NotAFolder(_) => "not_a_folder",
            Self::NoDraft { .. } => "no_draft",
            Self::DoesNotLoad(_) => "does_not_load",
            Self::Exists(_) => "exists",
            Self::Move { .. } => "move",
            Self::Remove { .. } => "remove",
        }
    }
}
