//! Exposed names: what clients see in direct mode.
//!
//! Every name matches `^[a-zA-Z0-9_-]{1,64}$` (what OpenAI and Anthropic accept) and is
//! unique in the catalog. The rule, in order:
//!
//! 1. `{prefix}_{tool}` where `prefix` is the upstream's configured prefix (default: its
//!    name); characters outside `[a-zA-Z0-9_-]` become `_`. A tool whose name already
//!    starts with the prefix and a separator (`git_log` of server `git`) keeps its own name
//!    (`git_log`, not `git_git_log`): the model reads the server once.
//! 2. If that was lossy (a character was replaced) or is longer than 64, it is cut to 57
//!    characters and `_` plus 6 hex digits of SHA-256("server/tool") is appended, so two
//!    tools that differ only in replaced characters still get distinct names.
//! 3. If two tools still end up with the same name (e.g. server `a_b` tool `c` and server
//!    `a` tool `b_c`), the one that sorts first by (server, tool) keeps it and the others
//!    get the hash suffix.
//!
//! A name therefore depends only on the tool's own (server, tool) pair, except in case 3,
//! and is the same across restarts and when another server is added.

use super::record::ToolId;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};

/// The longest name model providers accept.
pub(crate) const MAX_NAME: usize = 64;

/// True when `name` is acceptable to OpenAI's and Anthropic's tool APIs.
pub fn is_valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn sanitize(s: &str) -> (String, bool) {
    let mut lossy = false;
    let out = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                lossy = true;
                '_'
            }
        })
        .collect();
    (out, lossy)
}

fn hashed(base: &str, id: &ToolId) -> String {
    let digest = Sha256::digest(id.to_string().as_bytes());
    let suffix = &hex::encode(digest)[..6];
    let keep: String = base.chars().take(MAX_NAME - 7).collect();
    format!("{keep}_{suffix}")
}

/// The name a tool gets on its own, before collisions with other tools are considered.
pub fn candidate(prefix: &str, id: &ToolId) -> String {
    let (p, lossy_p) = sanitize(prefix);
    let (t, lossy_t) = sanitize(&id.name);
    let prefixed = !p.is_empty()
        && t.len() > p.len() + 1
        && t.starts_with(p.as_str())
        && matches!(t.as_bytes()[p.len()], b'_' | b'-');
    let base = if p.is_empty() || prefixed {
        t
    } else {
        format!("{p}_{t}")
    };
    if lossy_p || lossy_t || base.len() > MAX_NAME || base.is_empty() {
        hashed(&base, id)
    } else {
        base
    }
}

/// Assigns a unique exposed name to every tool. `tools` is (id, prefix, override);
/// an override (from configuration) is used when it is valid and is not the name another
/// tool gets on its own: a rename never takes a name from a tool that did not ask for one
/// (the gateway warns about refused overrides, see `Gateway::config_warnings`).
/// Returns names in the same order as the input.
pub fn assign(tools: &[(ToolId, String, Option<String>)]) -> Vec<String> {
    let mut order: Vec<usize> = (0..tools.len()).collect();
    order.sort_by(|&a, &b| tools[a].0.cmp(&tools[b].0));
    let mut taken = HashSet::new();
    let mut out = vec![String::new(); tools.len()];
    // The names tools without an override get on their own: an override may not take them.
    let own: HashSet<String> = tools
        .iter()
        .filter(|(_, _, over)| over.is_none())
        .map(|(id, prefix, _)| candidate(prefix, id))
        .collect();
    // Overrides first: an operator's explicit name wins over a generated collision suffix.
    let mut pending = BTreeMap::new();
    for &i in &order {
        let (id, prefix, over) = &tools[i];
        let usable = over.as_deref().filter(|o| is_valid(o) && !own.contains(*o));
        match usable {
            Some(o) if taken.insert(o.to_string()) => out[i] = o.to_string(),
            _ => {
                pending.insert(i, candidate(prefix, id));
            }
        }
    }
    for &i in &order {
        let Some(name) = pending.remove(&i) else {
            continue;
        };
        let name = if taken.contains(&name) {
            let mut n = hashed(&name, &tools[i].0);
            let mut k = 1;
            while taken.contains(&n) {
                n = hashed(&format!("{name}{k}"), &tools[i].0);
                k += 1;
            }
            n
        } else {
            name
        };
        taken.insert(name.clone());
        out[i] = name;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[(&str, &str)]) -> Vec<(ToolId, String, Option<String>)> {
        v.iter()
            .map(|(s, t)| (ToolId::new(*s, *t), s.to_string(), None))
            .collect()
    }

    #[test]
    fn plain_names_are_prefixed_and_valid() {
        let n = assign(&ids(&[("github", "create_issue"), ("time", "get-time")]));
        assert_eq!(n, vec!["github_create_issue", "time_get-time"]);
    }

    #[test]
    fn a_name_that_starts_with_its_prefix_is_not_prefixed_twice() {
        let n = assign(&ids(&[
            ("git", "git_log"),
            ("git", "git-status"),
            ("git", "gitk"),
            ("git", "git_"),
            ("time", "get_current_time"),
        ]));
        assert_eq!(
            n,
            vec![
                "git_log",
                "git-status",
                "git_gitk",
                "git_git_",
                "time_get_current_time"
            ]
        );
    }

    #[test]
    fn an_unprefixed_name_still_yields_to_the_tool_that_sorts_first() {
        // `git_log` keeps its own name; `log` would also be `git_log`: it gets the hash.
        let n = assign(&ids(&[("git", "log"), ("git", "git_log")]));
        assert_eq!(n[1], "git_log");
        assert!(n[0].starts_with("git_log_") && is_valid(&n[0]), "{n:?}");
        // Another server's tool of that name is prefixed as ever: no collision.
        let n = assign(&ids(&[("git", "git_log"), ("gh", "git_log")]));
        assert_eq!(n, vec!["git_log", "gh_git_log"]);
    }

    #[test]
    fn lossy_and_long_names_get_a_stable_hash() {
        let long = "x".repeat(80);
        let n = assign(&ids(&[
            ("a", "tool.one"),
            ("a", "tool_one"),
            ("srv", &long),
        ]));
        assert!(n.iter().all(|n| is_valid(n)), "{n:?}");
        assert_eq!(n[1], "a_tool_one");
        assert!(n[0].starts_with("a_tool_one_") && n[0].len() == "a_tool_one".len() + 7);
        assert_eq!(n[2].len(), 64);
        // Stable: the same input gives the same names, and adding a server changes nothing.
        let mut more = ids(&[("a", "tool.one"), ("a", "tool_one"), ("srv", &long)]);
        more.push((ToolId::new("zzz", "other"), "zzz".into(), None));
        assert_eq!(&assign(&more)[..3], &n[..]);
    }

    #[test]
    fn collisions_resolve_by_sort_order() {
        let n = assign(&ids(&[("a_b", "c"), ("a", "b_c")]));
        assert_eq!(n[1], "a_b_c");
        assert_ne!(n[0], n[1]);
        assert!(n[0].starts_with("a_b_c_"));
    }

    #[test]
    fn overrides_win_when_valid_and_free() {
        let mut t = ids(&[("github", "create_issue"), ("gitlab", "create_issue")]);
        t[1].2 = Some("open_issue".into());
        t[0].2 = Some("bad name!".into());
        let n = assign(&t);
        assert_eq!(n, vec!["github_create_issue", "open_issue"]);
    }

    #[test]
    fn an_override_never_takes_the_name_of_a_tool_that_did_not_ask() {
        let mut t = ids(&[("github", "create_issue"), ("gitlab", "create_issue")]);
        t[1].2 = Some("github_create_issue".into());
        let n = assign(&t);
        assert_eq!(
            n[0], "github_create_issue",
            "the tool that owns the name keeps it"
        );
        assert_eq!(
            n[1], "gitlab_create_issue",
            "the refused override falls back"
        );
    }
}
