//! Paths as programs write them (`./workspace/leads.csv`, `workspace/a/b.json`,
//! `/servers/github`), checked before anything is looked up: which tree, and the
//! components inside it. `..`, backslashes and control characters are refused, so no
//! path can leave its tree whatever store is behind it.

/// Components kept at most below a tree's root.
const MAX_DEPTH: usize = 8;
/// Longest component and whole path, in bytes.
const MAX_NAME_BYTES: usize = 255;
const MAX_PATH_BYTES: usize = 1024;

/// The two trees a program sees.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tree {
    /// `./workspace`: the principal's files, read and written.
    Workspace,
    /// `./servers`: the tools the caller may see, read only.
    Servers,
}

/// A checked path: its tree and the components below the tree's root (none: the root).
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// The tree the path is in (`/workspace` or `/servers`).
    pub tree: Tree,
    /// The components below the tree's root, in order.
    pub parts: Vec<String>,
}

impl Checked {
    /// The path below the tree's root, `/`-separated (`""` for the root).
    pub fn rel(&self) -> String {
        self.parts.join("/")
    }
}

/// What a path looks like, said after a refusal of its shape.
const SHAPE: &str = "paths look like ./workspace/name.csv or ./servers/<server>/<tool>.d.ts";

/// Why a program's path is refused; the message says what is wrong (and, for its shape,
/// what a path looks like). The program gets it as a `ToolError`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Longer than `MAX_PATH_BYTES`.
    #[error("the path is longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
    /// A control character or a backslash.
    #[error("{0:?} has a control character or a backslash; {SHAPE}")]
    BadCharacter(String),
    /// Neither tree.
    #[error("{0:?} is outside ./workspace and ./servers; {SHAPE}")]
    OutsideTrees(String),
    /// A `..` component.
    #[error("{0:?}: `..` is not allowed; a path cannot leave its folder")]
    Parent(String),
    /// A component longer than `MAX_NAME_BYTES` (its first 20 characters).
    #[error("the name {0:?}... is longer than {MAX_NAME_BYTES} bytes")]
    NameTooLong(String),
    /// More than `MAX_DEPTH` components.
    #[error("{0:?} is more than {MAX_DEPTH} folders deep")]
    TooDeep(String),
}

/// Checks `path`; the error says what is wrong and what a path looks like.
pub fn check(path: &str) -> Result<Checked, PathError> {
    if path.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong);
    }
    if path.chars().any(|c| c.is_control() || c == '\\') {
        return Err(PathError::BadCharacter(path.to_string()));
    }
    let mut parts = path
        .trim_start_matches('/')
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".");
    let tree = match parts.next() {
        Some("workspace") => Tree::Workspace,
        Some("servers") => Tree::Servers,
        _ => return Err(PathError::OutsideTrees(path.to_string())),
    };
    let parts: Vec<String> = parts.map(str::to_string).collect();
    if parts.iter().any(|p| p == "..") {
        return Err(PathError::Parent(path.to_string()));
    }
    if let Some(p) = parts.iter().find(|p| p.len() > MAX_NAME_BYTES) {
        let start: String = p.chars().take(20).collect();
        return Err(PathError::NameTooLong(start));
    }
    if parts.len() > MAX_DEPTH {
        return Err(PathError::TooDeep(path.to_string()));
    }
    Ok(Checked { tree, parts })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_a_program_writes_are_accepted() {
        for (p, tree, rel) in [
            ("./workspace/leads.csv", Tree::Workspace, "leads.csv"),
            ("workspace/a/b.json", Tree::Workspace, "a/b.json"),
            ("/workspace//x/./y", Tree::Workspace, "x/y"),
            ("./workspace", Tree::Workspace, ""),
            (
                "./servers/github/create_issue.d.ts",
                Tree::Servers,
                "github/create_issue.d.ts",
            ),
            ("servers/", Tree::Servers, ""),
        ] {
            let c = check(p).unwrap();
            assert_eq!((c.tree, c.rel().as_str()), (tree, rel), "{p}");
        }
    }

    #[test]
    fn escapes_and_odd_paths_are_refused() {
        for p in [
            "./workspace/../etc/passwd",
            "./workspace/a/../../servers",
            "../workspace/x",
            "/etc/passwd",
            "./workspace/a\\b",
            "./workspace/a\u{0}b",
            "./workspacex/a",
            "",
            "./workspace/a/b/c/d/e/f/g/h/i",
        ] {
            assert!(check(p).is_err(), "{p}");
        }
        assert!(check(&format!("./workspace/{}", "x".repeat(300))).is_err());
    }
}
