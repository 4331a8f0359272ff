//! Data-flow rules (`[code.flows]`) at the gate: a PII value a rule covers may reach only
//! the servers the rule lists. Checked for every token restored into a tool call's
//! arguments (execute's and programs' alike), and, inside a run, for the PII values the
//! run's earlier tool results held (values flow untokenized inside a run, so a program
//! that read a contact from the CRM cannot pass it on to a forbidden server either).
//!
//! Values that leave a run in a workspace file (`fs.writeFile`) or a state value
//! (`state.set`) keep their origin: what they carry is kept beside them and taken back in
//! by the run that reads them, so a later run is held to the same rules.
//!
//! The second check finds a value in any case and with other separators, inside longer
//! text; a program that encodes a value (spells it out, base64s it, splits it) is not
//! stopped. See docs/code-mode.md.

use super::pii::{self, Origins};
use crate::config::code_flows::FlowRule;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// The first rule that forbids sending a `class` value from `origins` to `server`, as
/// the message a refusal carries (`what` names the value, e.g. a token).
pub(crate) fn forbidden(
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

/// One PII value a run held, as it leaves the run in a workspace file or a state value
/// (kept beside it, so the run that reads it back holds it to the same rules).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Carried {
    pub class: String,
    /// The value's [`pii::canonical`] form.
    pub value: String,
    /// The servers whose results held it.
    pub from: BTreeSet<String>,
}

/// The PII values one run's tool results held (or its files and state brought in), and
/// which servers returned them: for the in-run check, for what the run stores, and so
/// tokens made from the run's answer know where they came from. Values are compared in
/// their canonical form and found wherever an argument holds them (another case, other
/// separators, inside a longer text).
#[derive(Default)]
pub struct RunFlows {
    /// Canonical value -> (class, origins).
    seen: Mutex<HashMap<String, (String, BTreeSet<String>)>>,
}

/// An argument's text in the forms values are looked for in.
struct Forms {
    lower: String,
    /// Letters and digits only, lower case (IBANs).
    alnum: String,
    /// Runs of digits joined across the separators phone and card numbers use.
    digits: Vec<String>,
}

impl Forms {
    fn of(text: &str) -> Self {
        let mut digits = vec![String::new()];
        for c in text.chars() {
            if c.is_ascii_digit() {
                digits.last_mut().expect("one run at least").push(c);
            } else if !matches!(c, ' ' | '.' | '-' | '(' | ')' | '/' | '+') {
                digits.push(String::new());
            }
        }
        digits.retain(|d| !d.is_empty());
        Self {
            lower: text
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_lowercase(),
            alnum: text
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .map(|c| c.to_ascii_lowercase())
                .collect(),
            digits,
        }
    }

    /// Whether this text holds `canon`, a value of `class`.
    fn holds(&self, class: &str, canon: &str) -> bool {
        match class {
            "EMAIL" => self.lower.contains(canon),
            "PHONE" | "CARD" => self.digits.iter().any(|d| d.contains(canon)),
            "IBAN" => self.alnum.contains(canon),
            // A field's value (a name): whole words, or the whole text when it is short.
            _ if canon.chars().count() < 4 => self.lower.trim() == canon,
            _ => self.lower.match_indices(canon).any(|(i, m)| {
                let before = self.lower[..i].chars().next_back();
                let after = self.lower[i + m.len()..].chars().next();
                !before.is_some_and(char::is_alphanumeric)
                    && !after.is_some_and(char::is_alphanumeric)
            }),
        }
    }
}

/// Every string, object key and number in `v`, in the forms values are looked for in.
fn texts(v: &Value, out: &mut Vec<Forms>) {
    match v {
        Value::String(s) => out.push(Forms::of(s)),
        Value::Number(n) => out.push(Forms::of(&n.to_string())),
        Value::Array(a) => a.iter().for_each(|x| texts(x, out)),
        Value::Object(o) => {
            for (k, x) in o {
                out.push(Forms::of(k));
                texts(x, out);
            }
        }
        _ => {}
    }
}

impl RunFlows {
    /// Notes the PII in a result `server` returned.
    pub fn saw(&self, server: &str, result: &Value, fields: &[String]) {
        let found = pii::found(result, fields);
        if found.is_empty() {
            return;
        }
        let mut seen = self.seen.lock().expect("run flows");
        for (class, value) in found {
            let canon = pii::canonical(class, &value);
            if canon.is_empty() {
                continue;
            }
            let entry = seen
                .entry(canon)
                .or_insert_with(|| (class.to_string(), BTreeSet::new()));
            entry.1.insert(server.to_string());
        }
    }

    /// The values this run holds that `v` carries (to keep beside it when it is stored).
    pub fn carried(&self, v: &Value) -> Vec<Carried> {
        let seen = self.seen.lock().expect("run flows");
        if seen.is_empty() {
            return Vec::new();
        }
        let mut forms = Vec::new();
        texts(v, &mut forms);
        let mut out: Vec<Carried> = seen
            .iter()
            .filter(|(canon, (class, _))| forms.iter().any(|f| f.holds(class, canon)))
            .map(|(canon, (class, from))| Carried {
                class: class.clone(),
                value: canon.clone(),
                from: from.clone(),
            })
            .collect();
        out.sort_by(|a, b| a.value.cmp(&b.value));
        out
    }

    /// Takes in values a stored file or state value carried (read back by this run).
    pub fn adopt(&self, carried: Vec<Carried>) {
        let mut seen = self.seen.lock().expect("run flows");
        for c in carried {
            let entry = seen
                .entry(c.value)
                .or_insert_with(|| (c.class, BTreeSet::new()));
            entry.1.extend(c.from);
        }
    }

    /// A refusal (rule, message) when `arguments` for `server` carry a value from an
    /// earlier result that a rule keeps from going there.
    pub fn check(
        &self,
        rules: &[FlowRule],
        server: &str,
        arguments: &Value,
        _fields: &[String],
    ) -> Option<(String, String)> {
        let seen = self.seen.lock().expect("run flows");
        if seen.is_empty() {
            return None;
        }
        let mut forms = Vec::new();
        texts(arguments, &mut forms);
        seen.iter().find_map(|(canon, (class, origins))| {
            // Only values a rule would stop are looked for.
            forbidden(rules, class, origins, server, "")?;
            if !forms.iter().any(|f| f.holds(class, canon)) {
                return None;
            }
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

    /// Every value the run holds, with its class and origins.
    pub fn all(&self) -> Vec<Carried> {
        let seen = self.seen.lock().expect("run flows");
        seen.iter()
            .map(|(canon, (class, from))| Carried {
                class: class.clone(),
                value: canon.clone(),
                from: from.clone(),
            })
            .collect()
    }

    /// What the run saw, for tokenizing its answer (keyed by canonical value).
    pub fn origins(&self) -> Origins {
        let seen = self.seen.lock().expect("run flows");
        seen.iter()
            .map(|(canon, (_, from))| (canon.clone(), from.clone()))
            .collect()
    }
}

/// A state value with what it carries, as the state store keeps it (see [`unwrap_state`]).
pub(crate) fn wrap_state(value: Value, carried: &[Carried]) -> Value {
    if carried.is_empty() || value.is_null() {
        return value;
    }
    serde_json::json!({ STATE_CARRIED: carried, "value": value })
}

/// A stored state value and the values it carries.
pub(crate) fn unwrap_state(stored: Value) -> (Value, Vec<Carried>) {
    match stored {
        Value::Object(mut o) if o.len() == 2 && o.contains_key(STATE_CARRIED) => {
            let carried = o
                .remove(STATE_CARRIED)
                .and_then(|c| serde_json::from_value(c).ok())
                .unwrap_or_default();
            (o.remove("value").unwrap_or(Value::Null), carried)
        }
        other => (other, Vec::new()),
    }
}

/// The key of a state value's envelope that lists what it carries.
const STATE_CARRIED: &str = "toolgate.carried";

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

    #[test]
    fn another_case_or_other_separators_are_the_same_value() {
        let run = RunFlows::default();
        run.saw(
            "crm",
            &json!({"c": "Ada@Example.org", "p": "+44 20 7946 0958"}),
            &[],
        );
        let phone = FlowRule {
            classes: vec!["PHONE".into()],
            ..rule()
        };
        for args in [
            json!({"to": "ADA@EXAMPLE.ORG"}),
            json!({"q": "mailto:ada@example.org?x=1"}),
            json!({"ADA@example.org": 1}),
        ] {
            assert!(run.check(&[rule()], "web", &args, &[]).is_some(), "{args}");
        }
        for args in [
            json!({"n": "+442079460958"}),
            json!({"n": "call (44) 20-7946-0958"}),
        ] {
            assert!(
                run.check(std::slice::from_ref(&phone), "web", &args, &[])
                    .is_some(),
                "{args}"
            );
        }
        assert!(run
            .check(&[phone], "web", &json!({"n": "442079 and 460958"}), &[])
            .is_none());
    }

    #[test]
    fn what_a_stored_value_carries_comes_back_with_it() {
        let run = RunFlows::default();
        run.saw("crm", &json!({"contact": "ada@example.org"}), &[]);
        let stored = wrap_state(
            json!({"e": "ADA@example.org"}),
            &run.carried(&json!({"e": "ADA@example.org"})),
        );
        let (value, carried) = unwrap_state(stored);
        assert_eq!(value, json!({"e": "ADA@example.org"}));
        let next = RunFlows::default();
        next.adopt(carried);
        assert!(next.check(&[rule()], "web", &value, &[]).is_some());
        assert_eq!(unwrap_state(json!({"plain": 1})).0, json!({"plain": 1}));
    }
}
