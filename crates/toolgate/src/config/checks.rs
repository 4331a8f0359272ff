//! Checks across upstreams that no single upstream's table can make: exposed-name
//! overrides that are not valid names or that two tools ask for, and two upstreams with the
//! same name prefix. Each error names the key and the fix. What needs the upstreams' tool
//! lists (a `rename` of a tool that does not exist, a pinned tool that is not there) is
//! judged once they connect: `Gateway::config_warnings`.

use super::Config;
use super::{invalid, Result};
use std::collections::BTreeMap;

impl Config {
    /// Cross-upstream checks; run after every file is read and merged.
    pub fn check_names(&self) -> Result<()> {
        let file = self.source_name();
        // Exposed name -> the `upstreams.X.rename."tool"` that asks for it.
        let mut wanted: BTreeMap<&str, String> = BTreeMap::new();
        for up in self.upstreams.values() {
            let mut renames: Vec<_> = up.rename.iter().collect();
            renames.sort();
            for (tool, name) in renames {
                let key = format!("upstreams.{}.rename.{tool:?}", up.name);
                if !toolgate_core::catalog::names::is_valid(name) {
                    invalid!(
                        "{file}: {key} = {name:?} is not a valid tool name: use 1 to 64 letters, \
                         digits, '_' or '-' (what model APIs accept)"
                    );
                }
                if let Some(other) = wanted.insert(name, key.clone()) {
                    invalid!(
                        "{file}: {other} and {key} both ask for the name {name:?}: give each tool its own name"
                    );
                }
            }
        }
        // Sanitized prefix -> the upstream that has it; disabled ones too, since enabling
        // one should not change another's names.
        let mut prefixes: BTreeMap<String, &str> = BTreeMap::new();
        for up in self.upstreams.values() {
            let p = toolgate_core::catalog::names::candidate(
                &up.prefix,
                &toolgate_core::catalog::ToolId::new("", "x"),
            );
            if let Some(other) = prefixes.insert(p, &up.name) {
                let shown = |n: &str| {
                    let u = &self.upstreams[n];
                    if u.prefix == u.name {
                        format!(
                            "upstreams.{n} (prefix defaults to its name, {:?})",
                            u.prefix
                        )
                    } else {
                        format!("upstreams.{n}.prefix = {:?}", u.prefix)
                    }
                };
                invalid!(
                    "{file}: {} and {} give their tools the same name prefix: set a different \
                     `prefix` on one of them",
                    shown(other),
                    shown(&up.name)
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    fn err(s: &str) -> String {
        match Config::from_toml_str(s, Path::new("toolgate.toml")) {
            Ok(_) => panic!("accepted:\n{s}"),
            Err(e) => format!("{e:#}"),
        }
    }

    #[test]
    fn a_rename_to_an_invalid_name_is_refused_naming_the_key() {
        let e = err("[upstreams.a]\ncommand='x'\nrename={ get = 'get it' }\n");
        assert!(
            e.contains("upstreams.a.rename.\"get\"") && e.contains("1 to 64"),
            "{e}"
        );
    }

    #[test]
    fn two_renames_to_one_name_are_refused() {
        let e = err("[upstreams.a]\ncommand='x'\nrename={ get = 'fetch' }\n\
             [upstreams.b]\ncommand='y'\nrename={ read = 'fetch' }\n");
        assert!(
            e.contains("upstreams.a.rename.\"get\"")
                && e.contains("upstreams.b.rename.\"read\"")
                && e.contains("own name"),
            "{e}"
        );
    }

    #[test]
    fn two_upstreams_with_one_prefix_are_refused() {
        let e = err("[upstreams.gh]\ncommand='x'\n[upstreams.github]\ncommand='y'\nprefix='gh'\n");
        assert!(
            e.contains("upstreams.gh (prefix defaults")
                && e.contains("upstreams.github.prefix = \"gh\"")
                && e.contains("different `prefix`"),
            "{e}"
        );
        // Distinct prefixes, and a rename to a fresh name, are fine.
        Config::from_toml_str(
            "[upstreams.gh]\ncommand='x'\nrename={ a = 'b' }\n[upstreams.github]\ncommand='y'\n",
            Path::new("toolgate.toml"),
        )
        .unwrap();
    }
}
