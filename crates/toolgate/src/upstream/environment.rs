//! The environment a stdio upstream starts with: a short list of variables every program
//! needs (as the official MCP SDKs pass: `PATH`, `HOME`, `USER`, `SHELL`, `TERM`, ...; plus
//! locale and temporary-folder variables), the names the upstream's `inherit_env` asks
//! for, and its own `env` on top. Nothing else of the gateway's environment reaches a
//! child, so a secret given to one upstream (`env = { TOKEN = "${GITHUB_TOKEN}" }`) is not
//! visible to another.

use std::collections::BTreeMap;

/// Passed to every stdio upstream when the gateway has them.
pub(crate) const BASE: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LANGUAGE", "TMPDIR", "TZ",
];

/// True for the variables every child gets: `BASE` and the locale's `LC_*`.
fn is_base(name: &str) -> bool {
    BASE.contains(&name) || name.starts_with("LC_")
}

/// The child's whole environment, from the gateway's (`from`), the upstream's
/// `inherit_env` names and its `env`. Values that look like exported shell functions
/// (`() {...`) are left out, as the SDKs do.
pub(crate) fn child_env(
    from: impl IntoIterator<Item = (String, String)>,
    inherit: &[String],
    env: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = from
        .into_iter()
        .filter(|(k, v)| (is_base(k) || inherit.contains(k)) && !v.starts_with("()"))
        .collect();
    out.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn only_the_base_the_asked_for_and_the_own_env_pass() {
        let gateway = vars(&[
            ("PATH", "/bin"),
            ("HOME", "/h"),
            ("LC_ALL", "C.UTF-8"),
            ("GITHUB_TOKEN", "secret"),
            ("AWS_PROFILE", "prod"),
            ("BASH_FUNC_x%%", "() { :; }"),
            ("SHELL", "() { evil; }"),
        ]);
        let own = BTreeMap::from([("TOKEN".to_string(), "mine".to_string())]);
        let env = child_env(gateway, &["AWS_PROFILE".to_string()], &own);
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(names, ["AWS_PROFILE", "HOME", "LC_ALL", "PATH", "TOKEN"]);
        assert_eq!(env["TOKEN"], "mine");
    }

    #[test]
    fn the_upstream_env_wins_over_an_inherited_value() {
        let env = child_env(
            vars(&[("PATH", "/bin")]),
            &[],
            &BTreeMap::from([("PATH".to_string(), "/opt/bin".to_string())]),
        );
        assert_eq!(env["PATH"], "/opt/bin");
    }
}
