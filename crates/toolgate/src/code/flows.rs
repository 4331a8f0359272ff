//! Data-flow rules (`[code.flows]`) at the gate: a PII value a rule covers may reach only
//! the servers the rule lists. Checked for every token restored into a tool call's
//! arguments (execute's and programs' alike), and, inside a run, for the PII values the
//! run's earlier tool results held (values flow untokenized inside a run, so a program
//! that read a contact from the CRM cannot pass it on to a forbidden server either).
//!
//! The second check matches values exactly as the PII patterns find them; a program that
//! encodes a value (spells it out, base64s it) is not stopped. See docs/code-mode.md.

use super::pii::{self, Origins};
use crate::config::code_flows::FlowRule;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Mutex;

/// The first rule that forbids sending a `class` value from `origins` to `server`, as
/// the message a refusal carries (`what` names the value, e.g. a token).
pub fn forbidden(
    rules: &[FlowRule],
    class: &str,
    origins: &BTreeSet<String>,
    server: &str,
    what: &str,
) -> Option<(String, String)> {
    let origins: Vec<String> = origins.iter().cloned().collect();
    let rule = rules
        .iter()
        .find(|r| r.covers(class, &origins) && !r.to.iter().any(|s| s == server))?;
    let from = if origins.is_empty() {
        String::new()
    } else {
        format!(" from {}", origins.join(", "))
    };
    let allowed = if rule.to.is_empty() {
        "no server".to_string()
    } else {
        rule.to.join(", ")
    };
    let message = format!(
        "flow rule {:?} (code.flows.{}) forbids sending {what} ({}{from}) to {server}: it may go to {allowed} only. The call was not made; send it where the rule allows, or leave it out",
        rule.name,
        rule.name,
        class.to_ascii_lowercase(),
    );
    Some((rule.name.clone(), message))
}

/// The PII values one run's tool results held, and which servers returned them: for
/// the in-run check, and so tokens made from the run's answer know where they came from.
#[derive(Default)]
pub struct RunFlows {
    seen: Mutex<Origins>,
    classes: Mutex<std::collections::HashMap<String, &'static str>>,
}

impl RunFlows {
    /// Notes the PII in a result `server` returned.
    pub fn saw(&self, server: &str, result: &Value, fields: &[String]) {
        let found = pii::found(result, fields);
        if found.is_empty() {
            return;
        }
        let mut seen = self.seen.lock().expect("run flows");
        let mut classes = self.classes.lock().expect("run flows");
        for (class, value) in found {
            classes.entry(value.clone()).or_insert(class);
            seen.entry(value).or_default().insert(server.to_string());
        }
    }

    /// A refusal (rule, message) when `arguments` for `server` carry a value from an
    /// earlier result that a rule keeps from going there.
    pub fn check(
        &self,
        rules: &[FlowRule],
        server: &str,
        arguments: &Value,
        fields: &[String],
    ) -> Option<(String, String)> {
        let seen = self.seen.lock().expect("run flows");
        if seen.is_empty() {
            return None;
        }
        let classes = self.classes.lock().expect("run flows");
        pii::found(arguments, fields)
            .into_iter()
            .find_map(|(class, value)| {
                let origins = seen.get(&value)?;
                let class = classes.get(&value).copied().unwrap_or(class);
                forbidden(
                    rules,
                    class,
                    origins,
                    server,
                    &format!(
                        "a value {} returned",
                        origins.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                )
            })
    }

    /// What the run saw, for tokenizing its answer.
    pub fn origins(&self) -> Origins {
        self.seen.lock().expect("run flows").clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule() -> FlowRule {
        FlowRule {
            name: "contacts".into(),
            classes: vec!["EMAIL".into()],
            from: vec!["crm".into()],
            to: vec!["mail".into()],
        }
    }

    #[test]
    fn a_covered_value_may_go_only_where_the_rule_says() {
        let crm: BTreeSet<String> = ["crm".to_string()].into();
        assert!(forbidden(&[rule()], "EMAIL", &crm, "mail", "x").is_none());
        let (name, msg) = forbidden(&[rule()], "EMAIL", &crm, "web", "x").unwrap();
        assert_eq!(name, "contacts");
        assert!(
            msg.contains("code.flows.contacts")
                && msg.contains("to web")
                && msg.contains("mail only"),
            "{msg}"
        );
        // Not covered: another class, or a value from elsewhere.
        assert!(forbidden(&[rule()], "PHONE", &crm, "web", "x").is_none());
        assert!(forbidden(&[rule()], "EMAIL", &BTreeSet::new(), "web", "x").is_none());
    }

    #[test]
    fn values_a_run_saw_are_checked_at_the_next_call() {
        let run = RunFlows::default();
        run.saw("crm", &json!({"contact": "ada@example.org"}), &[]);
        let args = json!({"url": "https://x.test/?to=ada@example.org"});
        assert!(run.check(&[rule()], "web", &args, &[]).is_some());
        assert!(run.check(&[rule()], "mail", &args, &[]).is_none());
        assert!(run
            .check(&[rule()], "web", &json!({"to": "bob@example.org"}), &[])
            .is_none());
        assert_eq!(run.origins()["ada@example.org"], ["crm".to_string()].into());
    }
}
