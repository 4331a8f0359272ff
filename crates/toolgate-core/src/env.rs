//! `${ENV_VAR}` substitution in configuration values, so secrets never need to be inline.

use std::path::{Path, PathBuf};

/// Why a `${NAME}` in a configuration value could not be replaced. Each message names the
/// file and the key, and says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// A `${` with no `}` after it.
    #[error("{}: {key}: unclosed \"${{\" in {value:?}: write ${{NAME}}, or $${{ for a literal", .file.display())]
    Unclosed {
        /// The configuration file.
        file: PathBuf,
        /// The key whose value it is.
        key: String,
        /// The value as written.
        value: String,
    },
    /// What is between `${` and `}` is not a variable's name.
    #[error("{}: {key}: {name:?} is not an environment variable name", .file.display())]
    BadName {
        /// The configuration file.
        file: PathBuf,
        /// The key whose value it is.
        key: String,
        /// What stands where the name should.
        name: String,
    },
    /// The variable is not set.
    #[error("{}: {key} uses ${{{name}}}, but the environment variable {name} is not set: export it before starting toolgate", .file.display())]
    Unset {
        /// The configuration file.
        file: PathBuf,
        /// The key whose value it is.
        key: String,
        /// The variable.
        name: String,
    },
}

/// Replaces every `${NAME}` in `value` with the environment variable NAME. `$${` escapes a
/// literal `${`. A missing variable is an error naming the file, the key and the variable.
pub fn substitute(value: &str, file: &Path, key: &str) -> Result<String, EnvError> {
    substitute_with(value, file, key, |name| std::env::var(name).ok())
}

/// [`substitute`] with the variables from `lookup` (tests pass their own).
pub(crate) fn substitute_with(
    value: &str,
    file: &Path,
    key: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, EnvError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(pos) = rest.find("${") {
        if rest[..pos].ends_with('$') {
            out.push_str(&rest[..pos - 1]);
            out.push_str("${");
            rest = &rest[pos + 2..];
            continue;
        }
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 2..];
        let Some(end) = after.find('}') else {
            return Err(EnvError::Unclosed {
                file: file.to_path_buf(),
                key: key.to_string(),
                value: value.to_string(),
            });
        };
        let name = &after[..end];
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            return Err(EnvError::BadName {
                file: file.to_path_buf(),
                key: key.to_string(),
                name: name.to_string(),
            });
        }
        match lookup(name) {
            Some(v) => out.push_str(&v),
            None => {
                return Err(EnvError::Unset {
                    file: file.to_path_buf(),
                    key: key.to_string(),
                    name: name.to_string(),
                })
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look(n: &str) -> Option<String> {
        (n == "TOKEN").then(|| "s3cret".to_string())
    }

    #[test]
    fn substitutes_and_escapes() {
        let f = Path::new("t.toml");
        let v = substitute_with("Bearer ${TOKEN}", f, "k", look).unwrap();
        assert_eq!(v, "Bearer s3cret");
        assert_eq!(substitute_with("a$${b}", f, "k", look).unwrap(), "a${b}");
        assert_eq!(substitute_with("plain", f, "k", look).unwrap(), "plain");
    }

    #[test]
    fn missing_or_bad_names_are_errors_that_say_what_to_do() {
        let f = Path::new("t.toml");
        let e = substitute_with("${NOPE}", f, "upstreams.x.env.A", look).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("t.toml") && m.contains("upstreams.x.env.A") && m.contains("NOPE"));
        assert!(m.contains("export"), "{m}");
        assert!(substitute_with("${", f, "k", look).is_err());
        assert!(substitute_with("${1A}", f, "k", look).is_err());
    }
}
