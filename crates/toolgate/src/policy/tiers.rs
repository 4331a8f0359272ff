//! Tiers (read < write < destructive) from a tool's annotations, and the per-tool rules of
//! the configuration (`[policy.tools."server/name"]`: tier, tags, shadow) that override them.

use super::glob::Glob;
use serde::{Deserialize, Serialize};
use toolgate_core::catalog::ToolRecord;

/// How much a tool can change. Ordered: a key allowed `write` may also `read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Read,
    Write,
    Destructive,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Read => "read",
            Tier::Write => "write",
            Tier::Destructive => "destructive",
        }
    }

    /// The tier the upstream's annotations imply. MCP's own defaults apply: `destructiveHint`
    /// is true unless said otherwise, so an unannotated tool is destructive (the cautious
    /// reading: nothing promised it is harmless).
    pub fn from_annotations(tool: &ToolRecord) -> Tier {
        if tool.annotation("readOnlyHint") == Some(true) {
            Tier::Read
        } else if tool.annotation("destructiveHint") == Some(false) {
            Tier::Write
        } else {
            Tier::Destructive
        }
    }
}

/// One `[policy.tools."PATTERN"]` table, validated.
#[derive(Debug, Clone)]
pub struct ToolRule {
    pub pattern: Glob,
    /// Replaces the annotation-derived tier (e.g. for a server that mislabels its tools).
    pub tier: Option<Tier>,
    /// Labels profiles can select by.
    pub tags: Vec<String>,
    /// Indexed and routable, but execute refuses it (a server being introduced).
    pub shadow: Option<bool>,
}

/// What the rules say about one tool, merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFacts {
    pub tier: Tier,
    pub tags: Vec<String>,
    pub shadow: bool,
    /// The effective annotation hints that hold (`readOnlyHint`, `destructiveHint`, ...).
    pub hints: Vec<&'static str>,
}

/// Merges every rule that matches `tool`: tags add up; for tier and shadow the most
/// specific pattern that sets them wins (an exact name beats `server/*`).
pub(crate) fn facts(rules: &[ToolRule], tool: &ToolRecord) -> ToolFacts {
    let id = tool.id.to_string();
    let mut matching: Vec<&ToolRule> = rules.iter().filter(|r| r.pattern.matches(&id)).collect();
    matching.sort_by_key(|r| std::cmp::Reverse(r.pattern.specificity()));
    let tier = matching
        .iter()
        .find_map(|r| r.tier)
        .unwrap_or_else(|| Tier::from_annotations(tool));
    let shadow = matching.iter().find_map(|r| r.shadow).unwrap_or(false);
    let mut tags: Vec<String> = matching.iter().flat_map(|r| r.tags.clone()).collect();
    tags.sort();
    tags.dedup();
    ToolFacts {
        tier,
        tags,
        shadow,
        hints: hints(tool),
    }
}

/// The annotation hints that hold for `tool`, with MCP's defaults for absent ones
/// (destructive and open-world unless said otherwise).
pub(crate) fn hints(tool: &ToolRecord) -> Vec<&'static str> {
    let read_only = tool.annotation("readOnlyHint") == Some(true);
    let mut out = Vec::new();
    if read_only {
        out.push("readOnlyHint");
    }
    if !read_only && tool.annotation("destructiveHint").unwrap_or(true) {
        out.push("destructiveHint");
    }
    if tool.annotation("idempotentHint") == Some(true) {
        out.push("idempotentHint");
    }
    if tool.annotation("openWorldHint").unwrap_or(true) {
        out.push("openWorldHint");
    }
    out
}

/// The hint names a profile may select by.
pub(crate) const HINTS: [&str; 4] = [
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolgate_core::catalog::ToolId;

    fn tool(name: &str, annotations: serde_json::Value) -> ToolRecord {
        ToolRecord {
            id: ToolId::new("s", name),
            exposed: format!("s_{name}"),
            tool: json!({"name": name, "annotations": annotations})
                .as_object()
                .unwrap()
                .clone(),
        }
    }

    #[test]
    fn tiers_follow_annotations_cautiously() {
        let t = |a| Tier::from_annotations(&tool("x", a));
        assert_eq!(t(json!({"readOnlyHint": true})), Tier::Read);
        assert_eq!(
            t(json!({"readOnlyHint": false, "destructiveHint": false})),
            Tier::Write
        );
        assert_eq!(t(json!({"destructiveHint": false})), Tier::Write);
        assert_eq!(t(json!({"destructiveHint": true})), Tier::Destructive);
        assert_eq!(
            t(json!({})),
            Tier::Destructive,
            "unannotated is destructive"
        );
        assert_eq!(t(json!(null)), Tier::Destructive);
        // readOnlyHint wins over a contradictory destructiveHint.
        assert_eq!(
            t(json!({"readOnlyHint": true, "destructiveHint": true})),
            Tier::Read
        );
        assert!(Tier::Read < Tier::Write && Tier::Write < Tier::Destructive);
    }

    #[test]
    fn the_most_specific_rule_wins_and_tags_add_up() {
        let rule = |p: &str, tier, tags: &[&str], shadow| ToolRule {
            pattern: Glob::new(p),
            tier,
            tags: tags.iter().map(|s| s.to_string()).collect(),
            shadow,
        };
        let rules = vec![
            rule("s/*", Some(Tier::Write), &["team"], Some(true)),
            rule("s/x", Some(Tier::Read), &["triage"], None),
        ];
        let f = facts(&rules, &tool("x", json!({})));
        assert_eq!(f.tier, Tier::Read);
        assert!(
            f.shadow,
            "shadow comes from the broader rule when the exact one is silent"
        );
        assert_eq!(f.tags, vec!["team", "triage"]);
        let f = facts(&rules, &tool("y", json!({"readOnlyHint": true})));
        assert_eq!(f.tier, Tier::Write, "configuration overrides annotations");
        let f = facts(&[], &tool("z", json!({"readOnlyHint": true})));
        assert_eq!((f.tier, f.shadow), (Tier::Read, false));
        assert_eq!(f.hints, vec!["readOnlyHint", "openWorldHint"]);
    }
}
