//! Tool and server names as JavaScript identifiers, for `tools.<server>.<tool>`.
//!
//! Deterministic for a given set of names: characters outside `[A-Za-z0-9_$]` become `_`,
//! a leading digit gets a `_` before it, reserved words and names that mean something on
//! an object (`__proto__`, `constructor`, `prototype`) get a `_` after; names that then
//! collide get `_2`, `_3`, ... in the order of their original names.

use std::collections::{BTreeMap, HashSet};
use toolgate_sandbox::protocol::ToolEntry;

const RESERVED: &[&str] = &[
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "new",
    "null",
    "return",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
    "let",
    "static",
    "implements",
    "interface",
    "package",
    "private",
    "protected",
    "public",
    "await",
    "arguments",
    "eval",
    "undefined",
    "NaN",
    "Infinity",
];

/// Property names with a meaning of their own on JavaScript objects.
const OBJECT_KEYS: &[&str] = &["__proto__", "constructor", "prototype"];

/// `name` as an identifier, before collisions are resolved.
pub(crate) fn ident(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    if RESERVED.contains(&s.as_str()) || OBJECT_KEYS.contains(&s.as_str()) {
        s.push('_');
    }
    s
}

/// Identifiers for each distinct name, unique among them; `taken` are names already used
/// (`call` at the top level of `tools`).
fn unique<'a>(
    names: impl IntoIterator<Item = &'a str>,
    taken: &[&str],
) -> BTreeMap<&'a str, String> {
    let mut sorted: Vec<&str> = names.into_iter().collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut used: HashSet<String> = taken.iter().map(|s| s.to_string()).collect();
    let mut out = BTreeMap::new();
    for name in sorted {
        let base = ident(name);
        let mut id = base.clone();
        let mut n = 2;
        while used.contains(&id) {
            id = format!("{base}_{n}");
            n += 1;
        }
        used.insert(id.clone());
        out.insert(name, id);
    }
    out
}

/// The `tools` layout for these (server, tool) pairs, in their order.
pub(crate) fn assign(pairs: &[(String, String)]) -> Vec<ToolEntry> {
    let servers = unique(pairs.iter().map(|(s, _)| s.as_str()), &["call"]);
    let mut by_server: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (s, t) in pairs {
        by_server.entry(s).or_default().push(t);
    }
    let tools: BTreeMap<&str, BTreeMap<&str, String>> = by_server
        .into_iter()
        .map(|(s, ts)| (s, unique(ts, &[])))
        .collect();
    pairs
        .iter()
        .map(|(s, t)| ToolEntry {
            server: s.clone(),
            tool: t.clone(),
            server_ident: servers[s.as_str()].clone(),
            tool_ident: tools[s.as_str()][t.as_str()].clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_safe_identifiers() {
        assert_eq!(ident("get-report.v2"), "get_report_v2");
        assert_eq!(ident("3d"), "_3d");
        assert_eq!(ident("delete"), "delete_");
        assert_eq!(ident("__proto__"), "__proto___");
        assert_eq!(ident("constructor"), "constructor_");
        assert_eq!(ident("héllo"), "h_llo");
        assert_eq!(ident(""), "_");
    }

    #[test]
    fn collisions_are_numbered_in_name_order() {
        let p = |s: &str, t: &str| (s.to_string(), t.to_string());
        let e = assign(&[
            p("a", "get_x"),
            p("a", "get-x"),
            p("call", "t"),
            p("b", "get-x"),
        ]);
        let ids: Vec<(&str, &str)> = e
            .iter()
            .map(|e| (e.server_ident.as_str(), e.tool_ident.as_str()))
            .collect();
        assert_eq!(
            ids,
            vec![
                ("a", "get_x_2"),
                ("a", "get_x"),
                ("call_2", "t"),
                ("b", "get_x")
            ]
        );
    }
}
