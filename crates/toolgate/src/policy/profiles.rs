//! Profiles: which tools a role sees (tools/list, route). A profile is a menu, not a lock:
//! it grants nothing, and an exact-name execute of a hidden tool is judged by the key alone.

use super::glob::PatternList;
use super::tiers::{Tier, ToolFacts};
use std::collections::HashSet;
use std::sync::Arc;
use toolgate_core::catalog::ToolRecord;
use toolgate_route::{Described, Retriever};

/// One `[policy.profiles.NAME]`. Each list that is set narrows the profile further; within
/// a list a tool qualifies when a plain entry matches (or there is none) and no `!` entry does.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    pub name: String,
    /// `server/tool` globs, e.g. `["github/*", "!github/delete_*"]`.
    pub tools: PatternList,
    /// Annotation hints, e.g. `["readOnlyHint"]` or `["!destructiveHint"]`.
    pub annotations: PatternList,
    /// Tags from `[policy.tools]`, e.g. `["triage", "!admin"]`.
    pub tags: PatternList,
    /// Tiers, e.g. `["read", "write"]` (empty: any).
    pub tiers: Vec<Tier>,
}

impl Profile {
    /// Whether this profile shows `tool`, whose merged facts are `facts`.
    pub fn shows(&self, tool: &ToolRecord, facts: &ToolFacts) -> bool {
        let tags: Vec<&str> = facts.tags.iter().map(String::as_str).collect();
        self.tools.matches(&tool.id.to_string())
            && (self.annotations.is_empty() || self.annotations.matches_any(&facts.hints))
            && (self.tags.is_empty() || self.tags.matches_any(&tags))
            && (self.tiers.is_empty() || self.tiers.contains(&facts.tier))
    }
}

impl Profile {
    /// Whether this profile lists the resources and prompts of `server`: its `tools` list
    /// covers the whole server (`server/*`, `*`, or no list). The annotation, tag and tier
    /// lists describe tools, so they do not apply.
    pub fn shows_server(&self, server: &str) -> bool {
        self.tools.matches(&super::whole_server(server))
    }
}

/// A retriever that only finds what a predicate lets through: route over a profile's view.
/// Ranking asks the full index for enough extra results to cover every hidden tool, so the
/// `k` visible ones returned are exactly the `k` best visible ones.
pub(crate) struct Visible<'a, R: ?Sized> {
    pub inner: &'a R,
    pub keep: &'a (dyn Fn(&ToolRecord) -> bool + Send + Sync),
    /// How many tools the predicate hides in the catalog the index was built from.
    pub hidden: usize,
}

impl<R: ?Sized> Visible<'_, R> {
    /// The first `k` of `ranked` the predicate lets through.
    fn visible(
        &self,
        mut ranked: Vec<(Arc<ToolRecord>, f32)>,
        k: usize,
    ) -> Vec<(Arc<ToolRecord>, f32)> {
        ranked.retain(|(t, _)| (self.keep)(t));
        ranked.truncate(k);
        ranked
    }
}

impl<R: Retriever + ?Sized> Retriever for Visible<'_, R> {
    fn rank(&self, query: &str, server: Option<&str>, k: usize) -> Vec<(Arc<ToolRecord>, f32)> {
        self.visible(self.inner.rank(query, server, k + self.hidden), k)
    }

    fn exact(&self, name: &str, server: Option<&str>) -> Vec<Arc<ToolRecord>> {
        let mut found = self.inner.exact(name, server);
        found.retain(|t| (self.keep)(t));
        found
    }

    fn ceiling(&self, query: &str) -> Option<f32> {
        self.inner.ceiling(query)
    }

    fn rank_described(&self, query: &str, server: Option<&str>, k: usize) -> Described {
        let all = self.inner.rank_described(query, server, k + self.hidden);
        let paired = all.by_description.len() == all.ranked.len();
        // The ceiling is the whole index's: a hidden tool's words are still words a
        // catalog tool can explain.
        let mut kept = Described {
            ceiling: all.ceiling,
            ..Described::default()
        };
        for (i, r) in all.ranked.into_iter().enumerate() {
            if kept.ranked.len() < k && (self.keep)(&r.0) {
                if paired {
                    kept.by_description.push(all.by_description[i]);
                }
                kept.ranked.push(r);
            }
        }
        kept
    }

    fn closest_each(
        &self,
        readings: &[&str],
        server: Option<&str>,
        k: usize,
    ) -> Vec<Vec<(Arc<ToolRecord>, f32)>> {
        let lists = self.inner.closest_each(readings, server, k + self.hidden);
        lists.into_iter().map(|l| self.visible(l, k)).collect()
    }

    // Hidden tools count as names, so a hidden tool's exact name is never ranked.
    fn is_name(&self, name: &str, server: Option<&str>) -> bool {
        self.inner.is_name(name, server)
    }

    fn text_terms(&self, tool: &ToolRecord) -> Option<Arc<HashSet<String>>> {
        self.inner.text_terms(tool)
    }

    fn calibrated(&self) -> bool {
        self.inner.calibrated()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::glob::Glob;
    use crate::policy::tiers::{facts, ToolRule};
    use serde_json::json;
    use toolgate_core::catalog::ToolId;

    fn tool(server: &str, name: &str, annotations: serde_json::Value) -> ToolRecord {
        ToolRecord {
            id: ToolId::new(server, name),
            exposed: format!("{server}_{name}"),
            tool: json!({"name": name, "annotations": annotations})
                .as_object()
                .unwrap()
                .clone(),
        }
    }

    #[test]
    fn each_list_narrows_the_profile() {
        let rules = vec![ToolRule {
            pattern: Glob::new("github/list_*"),
            tier: None,
            tags: vec!["triage".into()],
            shadow: None,
        }];
        let p = Profile {
            name: "p".into(),
            tools: PatternList::parse(&["github/*", "!github/delete_*"]),
            annotations: PatternList::parse(&["readOnlyHint"]),
            ..Default::default()
        };
        let shows = |p: &Profile, t: &ToolRecord| p.shows(t, &facts(&rules, t));
        let ro = json!({"readOnlyHint": true});
        assert!(shows(&p, &tool("github", "list_issues", ro.clone())));
        assert!(
            !shows(&p, &tool("github", "create_issue", json!({}))),
            "not read-only"
        );
        assert!(
            !shows(&p, &tool("github", "delete_repo", ro.clone())),
            "excluded"
        );
        assert!(
            !shows(&p, &tool("docs", "search", ro.clone())),
            "other server"
        );
        let tagged = Profile {
            tags: PatternList::parse(&["triage"]),
            ..Default::default()
        };
        assert!(shows(&tagged, &tool("github", "list_prs", json!({}))));
        assert!(!shows(&tagged, &tool("github", "get_pr", json!({}))));
        let safe = Profile {
            annotations: PatternList::parse(&["!destructiveHint"]),
            tiers: vec![Tier::Read, Tier::Write],
            ..Default::default()
        };
        assert!(shows(
            &safe,
            &tool("a", "b", json!({"destructiveHint": false}))
        ));
        assert!(
            !shows(&safe, &tool("a", "b", json!({}))),
            "unannotated counts as destructive"
        );
        assert!(Profile::default().shows(
            &tool("a", "b", json!({})),
            &facts(&[], &tool("a", "b", json!({})))
        ));
    }

    /// Hidden tools are never among the closest in meaning, even when they are closer
    /// than every visible one; the `k` returned are the `k` closest visible ones, for each
    /// reading of the task.
    #[test]
    fn hidden_tools_are_never_the_closest() {
        use toolgate_core::catalog::{parse_catalog, Catalog};
        use toolgate_route::RouteIndex;
        let entries = parse_catalog(
            r#"[{"server": "secret", "tool": {"name": "get_time", "description": "Current time"}},
                {"server": "open", "tool": {"name": "get_weather", "description": "Weather forecast"}},
                {"server": "open", "tool": {"name": "send_mail", "description": "Send an email"}}]"#,
        )
        .unwrap();
        let index = RouteIndex::build(&Catalog::from_entries(entries));
        let readings = ["what time is it right now", "send a message"];
        let all = index.closest_each(&readings, None, 1);
        assert_eq!(all[0][0].0.id.to_string(), "secret/get_time");
        let keep = |t: &ToolRecord| &*t.id.server != "secret";
        let visible = Visible {
            inner: &index,
            keep: &keep,
            hidden: 1,
        };
        let lists = visible.closest_each(&readings, None, 2);
        assert_eq!(lists.len(), 2);
        for list in &lists {
            assert_eq!(list.len(), 2, "{list:?}");
            assert!(list.iter().all(|(t, _)| keep(t)), "{list:?}");
        }
        assert_eq!(lists[1][0].0.id.to_string(), "open/send_mail");
    }

    #[test]
    fn a_profile_shows_resources_of_the_servers_it_covers_whole() {
        let p = |tools: &[&str]| Profile {
            tools: PatternList::parse(tools),
            ..Default::default()
        };
        assert!(p(&[]).shows_server("github"), "no list: everything");
        assert!(p(&["github/*", "!github/delete_*"]).shows_server("github"));
        assert!(!p(&["github/*"]).shows_server("docs"));
        assert!(
            !p(&["github/list_*"]).shows_server("github"),
            "some tools only"
        );
        assert!(!p(&["*", "!github/*"]).shows_server("github"));
        let read_only = Profile {
            tiers: vec![Tier::Read],
            ..Default::default()
        };
        assert!(read_only.shows_server("github"), "tiers describe tools");
    }
}
