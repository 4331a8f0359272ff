//! Why a call was refused: one typed value per reason. Its [`RefusalKind::code`] is what
//! the model's answer (`"error"` in the structured part, `[code]` in a program's failure)
//! and the audit record (`"code"`) both carry, so a refusal reads the same everywhere.

use super::audit::Verdict;
use serde_json::Value;

/// The reasons a call does not reach its upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusalKind {
    /// The audit log is configured but cannot be written: nothing runs unrecorded.
    AuditUnwritable,
    /// The tool is being introduced in shadow mode: routable, not callable.
    Shadow,
    /// No tool of that name is visible to this caller (or none exists).
    NotVisible,
    /// The key's scopes do not cover the tool.
    Scope,
    /// The tool's tier is above the key's.
    Tier,
    /// The arguments do not match the tool's full input schema.
    InvalidArguments,
    /// A PII token in the arguments is unknown, expired or another principal's.
    PiiToken,
    /// A `[code.flows]` rule keeps a value from this tool's server.
    Flow,
    /// A program called a destructive tool: only a call the user can confirm may run it.
    ApprovalRequired,
    /// The user declined (or dismissed) the approval question.
    ApprovalDeclined,
    /// The client cannot be asked, and the call needs approval.
    ApprovalUnavailable,
    /// The approval question went to the client (MRTR); the retry carries the answer.
    ApprovalRequested,
}

impl RefusalKind {
    /// The code the model and the audit log see.
    pub fn code(self) -> &'static str {
        match self {
            RefusalKind::AuditUnwritable => "audit_unwritable",
            RefusalKind::Shadow => "shadow",
            RefusalKind::NotVisible => "not_visible",
            RefusalKind::Scope => "scope",
            RefusalKind::Tier => "tier",
            RefusalKind::InvalidArguments => "invalid_arguments",
            RefusalKind::PiiToken => "pii_token",
            RefusalKind::Flow => "flow",
            RefusalKind::ApprovalRequired => "approval_required",
            RefusalKind::ApprovalDeclined => "approval_declined",
            RefusalKind::ApprovalUnavailable => "approval_unavailable",
            RefusalKind::ApprovalRequested => "approval_requested",
        }
    }

    /// The audit record's `decision` for this refusal. Arguments that fail validation (or
    /// a token, or a flow rule) were permitted but never run, as before: `allowed` with
    /// outcome `not_run`; everything else is its own decision.
    pub fn verdict(self) -> Verdict {
        match self {
            RefusalKind::Shadow => Verdict::Shadow,
            RefusalKind::NotVisible => Verdict::Unavailable,
            RefusalKind::ApprovalDeclined => Verdict::ApprovalDeclined,
            RefusalKind::ApprovalUnavailable | RefusalKind::ApprovalRequired => {
                Verdict::ApprovalUnavailable
            }
            RefusalKind::ApprovalRequested => Verdict::ApprovalRequested,
            RefusalKind::InvalidArguments | RefusalKind::PiiToken | RefusalKind::Flow => {
                Verdict::Allowed
            }
            RefusalKind::AuditUnwritable | RefusalKind::Scope | RefusalKind::Tier => {
                Verdict::Refused
            }
        }
    }
}

/// One refusal: its kind, the sentence for the model (what is wrong, what to do), and
/// any structured detail (the validation report of invalid arguments).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub kind: RefusalKind,
    pub message: String,
    pub detail: Option<Value>,
}

impl Refusal {
    pub(crate) fn new(kind: RefusalKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            detail: None,
        }
    }

    pub(crate) fn code(&self) -> &'static str {
        self.kind.code()
    }

    /// The audit record's `error` of a permitted call that was not run (the short forms
    /// the trail has always had); other refusals are recorded with their message.
    pub(crate) fn not_run_reason(&self) -> String {
        match self.kind {
            RefusalKind::InvalidArguments => "invalid arguments".into(),
            RefusalKind::PiiToken => "unknown or foreign PII token".into(),
            RefusalKind::Flow => {
                let rule = self.detail.as_ref().and_then(|d| d["rule"].as_str());
                format!("flow rule {}", rule.unwrap_or_default())
            }
            _ => self.message.clone(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_permitted_refusals_stay_allowed_not_run() {
        use RefusalKind::*;
        let all = [
            AuditUnwritable,
            Shadow,
            NotVisible,
            Scope,
            Tier,
            InvalidArguments,
            PiiToken,
            Flow,
            ApprovalRequired,
            ApprovalDeclined,
            ApprovalUnavailable,
            ApprovalRequested,
        ];
        let mut codes: Vec<&str> = all.iter().map(|k| k.code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), all.len());
        assert_eq!(Scope.verdict(), Verdict::Refused);
        assert_eq!(InvalidArguments.verdict(), Verdict::Allowed);
        let flow = Refusal {
            detail: Some(serde_json::json!({"rule": "contacts"})),
            ..Refusal::new(Flow, "no")
        };
        assert_eq!(flow.not_run_reason(), "flow rule contacts");
    }
}
