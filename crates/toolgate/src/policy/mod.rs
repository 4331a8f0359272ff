//! Policy: profiles decide what a session sees (tools/list, route, and the resources and
//! prompts of the servers they cover whole); keys, scopes and tiers decide what it may call
//! (and whose resources and prompts it may read); destructive calls may need the user's
//! approval; every call is audited. The two questions are independent: visibility never
//! grants, and a permitted tool stays callable by exact name (a resource readable by URI)
//! even when its profile hides it.
//!
//! - [`glob`]: `server/tool` globs and `!` exclusions.
//! - [`tiers`]: read / write / destructive from annotations and per-tool rules (tags, shadow).
//! - [`profiles`]: what a profile shows, and route over a profile's view.
//! - [`keys`]: API keys (hashes, constant-time lookup) and what each may call.
//! - [`oauth`]: access tokens from the team's authorization server (`[auth.oauth]`).
//! - [`permit`]: one judged call: its refusal, approval and outcome, audited.
//! - [`refusal`]: why a call was refused, as a typed value with one code.
//! - [`approval`]: asking the user before destructive calls.
//! - [`audit`]: the append-only JSON-lines trail.
//! - [`config`]: the `[policy]` section of `toolgate.toml`.

pub(crate) mod approval;
pub(crate) mod audit;
pub(crate) mod config;
pub(crate) mod glob;
pub(crate) mod grant;
pub(crate) mod keys;
pub(crate) mod oauth;
pub(crate) mod permit;
pub(crate) mod profiles;
pub(crate) mod refusal;
pub(crate) mod tiers;

pub(crate) use config::PolicyConfig;
pub(crate) use grant::Grant;
pub(crate) use keys::AuthRejection;
pub(crate) use permit::Permit;
pub(crate) use profiles::Profile;
pub(crate) use refusal::{Refusal, RefusalKind};
pub(crate) use tiers::Tier;

use approval::Approver;
use audit::{AuditLog, Verdict};
use serde_json::{Map, Value};
use std::sync::Arc;
use toolgate_core::catalog::{Catalog, CatalogEntry, ToolRecord};
pub(crate) use toolgate_core::principal::Principal;

/// The identity local (stdio) sessions have when no `stdio_key` is configured.
pub(crate) const LOCAL_IDENTITY: &str = "local";
/// The identity HTTP sessions have when no keys are configured (open, loopback by default).
pub(crate) const OPEN_IDENTITY: &str = "anonymous";

/// What a scope or profile pattern must match to cover a whole server (its resources and
/// prompts): `server/*`, taken literally.
pub(crate) fn whole_server(server: &str) -> String {
    format!("{server}/*")
}

/// Why a request for a server's resources or prompts was refused ([`Policy::access`]); the
/// message is what the client reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AccessRefused {
    /// The audit log cannot be written, and nothing is read unrecorded.
    #[error("{method} {target:?} was refused: the audit log cannot be written ({reason}); ask the gateway's administrator")]
    Unrecorded {
        /// The request's method.
        method: String,
        /// The URI or prompt name asked for.
        target: String,
        /// Why the log cannot be written.
        reason: String,
    },
    /// The key's scopes do not cover the whole server (what is missing, and whom to ask).
    #[error("{0}")]
    Scope(String),
}

/// The policy of a running gateway.
pub struct Policy {
    pub(crate) config: PolicyConfig,
    /// `None` when no audit path is configured.
    pub(crate) audit: Option<Arc<AuditLog>>,
    /// Set when the audit log is configured but cannot be opened: every call is then
    /// refused, since calls must not run unrecorded.
    audit_broken: Option<String>,
    /// Approvals asked of 2026-07-28 clients, waiting for the retry that answers them.
    pub(crate) approvals: approval::PendingApprovals,
    /// Checks access tokens when `[auth.oauth]` is configured.
    pub(crate) oauth: Option<Arc<oauth::Verifier>>,
}

/// Who is asking, through which surface, seeing which profile: one per request.
#[derive(Clone)]
pub struct Caller {
    pub(crate) policy: Arc<Policy>,
    pub(crate) session: String,
    pub(crate) grant: Arc<Grant>,
    pub(crate) profile: Option<Arc<Profile>>,
    /// `guided` or `direct`.
    pub(crate) surface: &'static str,
    /// How to ask this session's user (absent: no way to ask).
    pub(crate) approver: Option<Arc<dyn Approver>>,
    /// Where an upstream's sampling, elicitation and roots requests during this caller's
    /// calls go: this session's client (absent: outside any session).
    pub(crate) relay: Option<Arc<dyn toolgate_core::call::ClientRelay>>,
    /// The program run (`execute_code`, a skill) this caller's calls are made from: their
    /// audit records carry it as `run`, linking them to the run's own records.
    pub(crate) run: Option<Arc<str>>,
}

impl Caller {
    /// A caller outside any session that sees `profile` (for reports over a catalog).
    pub fn offline(policy: Arc<Policy>, profile: Option<Arc<Profile>>) -> Self {
        Self {
            policy,
            session: String::new(),
            grant: Grant::full(LOCAL_IDENTITY),
            profile,
            surface: "direct",
            approver: None,
            relay: None,
            run: None,
        }
    }

    /// The name of the profile the caller sees, if any.
    pub(crate) fn profile_name(&self) -> Option<&str> {
        self.profile.as_deref().map(|p| p.name.as_str())
    }

    /// Whom a per-caller limit counts against: the configured API key this caller
    /// presented (over all its sessions, stdio and HTTP), else this session alone (no keys
    /// configured, or a stdio session without `stdio_key`). The two forms cannot collide.
    pub(crate) fn limit_owner(&self) -> String {
        if let Some(subject) = &self.grant.subject {
            return subject.as_str().to_string();
        }
        match self.policy.config.key(&self.grant.name) {
            Some(k) if Arc::ptr_eq(&k.grant, &self.grant) => format!("key:{}", self.grant.name),
            _ => format!("session:{}", self.session),
        }
    }

    /// Who this request acts for, and so who owns the handles it makes: the configured
    /// API key it presented, else the gateway's local identity (see [`Principal`]).
    /// Whom this caller's upstream requests act for, with the access token it presented
    /// (a user-delegated upstream exchanges it; no other upstream reads it).
    pub(crate) fn on_behalf(&self) -> toolgate_core::call::OnBehalf {
        toolgate_core::call::OnBehalf::new(self.principal(), self.grant.token.clone())
    }

    /// Who the caller acts for: the token's subject, else the key's identity.
    pub(crate) fn principal(&self) -> Principal {
        if let Some(subject) = &self.grant.subject {
            return subject.clone();
        }
        match self.policy.config.key(&self.grant.name) {
            Some(k) if Arc::ptr_eq(&k.grant, &self.grant) => Principal::key(&self.grant.name),
            _ if self.grant.name == grant::UNAUTHENTICATED => Principal::nobody(),
            _ => Principal::local(),
        }
    }

    /// How a per-caller limit's owner is named in a message to the model.
    pub(crate) fn limit_owner_label(&self) -> String {
        match self.limit_owner().split_once(':') {
            Some(("key", name)) => format!("API key {name:?} (over all its sessions)"),
            Some(("sub", _)) => format!("{} (over all their sessions)", self.principal().label()),
            _ => "this session".to_string(),
        }
    }
}

impl Policy {
    /// Builds the policy and opens the audit log. A log that cannot be opened does not stop
    /// the gateway, but every call is refused until it is fixed (see [`Policy::preflight`]).
    pub fn new(config: &PolicyConfig) -> Arc<Self> {
        let (audit, audit_broken) = match &config.audit_path {
            None => (None, None),
            Some(p) => {
                match AuditLog::open(p, config.audit_arguments, config.audit_secret.as_deref()) {
                    Ok(log) => (Some(log), None),
                    Err(e) => {
                        tracing::error!("{e:#}");
                        (None, Some(format!("{e:#}")))
                    }
                }
            }
        };
        Arc::new(Self {
            config: config.clone(),
            audit,
            audit_broken,
            approvals: Default::default(),
            oauth: config.oauth.clone().map(oauth::Verifier::new),
        })
    }

    /// Fails when the audit log is configured but cannot be opened (for `serve` to stop early).
    pub fn preflight(config: &PolicyConfig) -> anyhow::Result<()> {
        match &config.audit_path {
            Some(p) => {
                AuditLog::open(p, config.audit_arguments, config.audit_secret.as_deref()).map(drop)
            }
            None => Ok(()),
        }
    }

    /// Whether HTTP requests must present a key or an access token.
    pub(crate) fn requires_keys(&self) -> bool {
        !self.config.keys.is_empty() || self.oauth.is_some()
    }

    /// The grant for an HTTP request's `Authorization` header: a configured API key, else
    /// an access token `[auth.oauth]` accepts.
    pub(crate) async fn authenticate(
        &self,
        authorization: Option<&str>,
    ) -> Result<Arc<Grant>, AuthRejection> {
        if !self.requires_keys() {
            return Ok(Grant::full(OPEN_IDENTITY));
        }
        let token = (authorization.and_then(keys::bearer)).ok_or(AuthRejection::Missing {
            oauth: self.oauth.is_some(),
        })?;
        let by_key = if self.config.keys.is_empty() {
            Err(AuthRejection::Unknown)
        } else {
            keys::authenticate(&self.config.keys, token)
        };
        match (by_key, &self.oauth) {
            (Err(AuthRejection::Unknown), Some(verifier)) => verifier
                .authenticate(token)
                .await
                .map_err(AuthRejection::Token),
            (result, _) => result,
        }
    }

    /// The identity of stdio sessions: `stdio_key` if configured, else full local access.
    pub(crate) fn stdio_grant(&self) -> Arc<Grant> {
        match self
            .config
            .stdio_key
            .as_deref()
            .and_then(|k| self.config.key(k))
        {
            Some(k) => k.grant.clone(),
            None => Grant::full(LOCAL_IDENTITY),
        }
    }

    /// The audit log's file (`policy.audit_path`), if there is one.
    pub(crate) fn audit_path(&self) -> Option<&std::path::Path> {
        self.config.audit_path.as_deref()
    }

    /// The profile of stdio sessions (`policy.stdio_profile`), if one is named.
    pub(crate) fn stdio_profile(&self) -> Option<&str> {
        self.config.stdio_profile.as_deref()
    }

    /// The profile configured as `name`.
    pub(crate) fn profile(&self, name: &str) -> Option<Arc<Profile>> {
        self.config.profiles.get(name).cloned()
    }

    /// The profile a session sees: one named explicitly (HTTP path, `--profile`), else
    /// the key's, else the configured default, else none (every tool).
    pub(crate) fn profile_for(
        &self,
        explicit: Option<&Arc<Profile>>,
        grant: &Grant,
    ) -> Option<Arc<Profile>> {
        explicit.cloned().or_else(|| {
            grant
                .profile
                .as_deref()
                .or(self.config.default_profile.as_deref())
                .and_then(|p| self.profile(p))
        })
    }

    /// What the policy knows of `tool`: its tier, tags and hints (`[policy.tools]` over its annotations).
    pub(crate) fn facts(&self, tool: &ToolRecord) -> tiers::ToolFacts {
        tiers::facts(&self.config.tools, tool)
    }

    /// The one meaning of "destructive": the tool's tier, from the configured rules or
    /// else its annotations (unannotated is destructive, see `Tier::from_annotations`).
    /// Approval, keys and code mode all ask this.
    pub(crate) fn destructive(&self, tool: &ToolRecord) -> bool {
        self.facts(tool).tier == Tier::Destructive
    }

    /// Whether route may name `tool` for this caller (shadow tools included).
    pub(crate) fn shows(&self, caller: &Caller, tool: &ToolRecord) -> bool {
        match &caller.profile {
            None => true,
            Some(p) => p.shows(tool, &self.facts(tool)),
        }
    }

    /// Whether this caller's resources/list, resources/templates/list and prompts/list
    /// show `server`'s items: the profile covers the whole server. As with tools, the key
    /// is not asked: reading is judged by `Grant::missing_server`.
    pub(crate) fn shows_server(&self, caller: &Caller, server: &str) -> bool {
        caller
            .profile
            .as_ref()
            .is_none_or(|p| p.shows_server(server))
    }

    /// Whether `tool` belongs in this caller's tools/list: shown, and not a shadow tool
    /// (listing what cannot run would only invite failing calls).
    pub(crate) fn lists(&self, caller: &Caller, tool: &ToolRecord) -> bool {
        let facts = self.facts(tool);
        !facts.shadow
            && caller
                .profile
                .as_ref()
                .is_none_or(|p| p.shows(tool, &facts))
    }

    /// The servers with a tool this caller is shown, sorted: a hidden server is not named.
    pub(crate) fn servers<'c>(&self, caller: &Caller, catalog: &'c Catalog) -> Vec<&'c str> {
        let mut s: Vec<&str> = catalog
            .tools()
            .iter()
            .filter(|t| self.shows(caller, t))
            .map(|t| t.id.server.as_str())
            .collect();
        s.dedup();
        s
    }

    /// The catalog as this caller's tools/list shows it (for token reports).
    pub fn view(&self, caller: &Caller, catalog: &Catalog) -> Catalog {
        Catalog::from_entries(
            catalog
                .tools()
                .iter()
                .filter(|t| self.lists(caller, t))
                .map(|t| CatalogEntry {
                    server: t.id.server.clone(),
                    tool: t.tool.clone(),
                })
                .collect(),
        )
    }

    /// What this caller's direct tools/list costs (OpenAI form, o200k), for `auto` mode.
    pub(crate) fn listing_tokens(&self, caller: &Caller, catalog: &Catalog) -> usize {
        let tools: Vec<Value> = catalog
            .tools()
            .iter()
            .filter(|t| self.lists(caller, t))
            .map(|t| toolgate_route::shape::openai_form_of_tool(&t.exposed, &t.tool))
            .collect();
        toolgate_route::shape::Encoding::O200k.count_json(&Value::Array(tools))
    }

    /// The checks that need nobody's answer: the audit log works, the tool is not in
    /// shadow, and the key's scopes and tier cover it. Approval is `Permit::confirm`.
    pub(crate) fn check(
        &self,
        caller: &Caller,
        tool: &ToolRecord,
        arguments: &Map<String, Value>,
    ) -> Result<Permit, Refusal> {
        let facts = self.facts(tool);
        let id = tool.id.to_string();
        let visible = caller
            .profile
            .as_ref()
            .is_none_or(|p| p.shows(tool, &facts));
        // A log that could not be opened refuses everything; a write that fails is found by
        // the call's own `start` record (`Permit::confirm`), so the log recovers with the disk.
        if let Some(e) = &self.audit_broken {
            return Err(Refusal::new(RefusalKind::AuditUnwritable, format!(
                "{id} was not run: the audit log cannot be written ({e}); ask the gateway's administrator"
            )));
        }
        let permit = Permit::new(self, caller, tool, facts.tier, visible, arguments);
        let contact = self.config.contact.as_deref();
        if facts.shadow {
            let ask = contact.unwrap_or("the gateway's administrator");
            return Err(permit.refuse(Refusal::new(
                RefusalKind::Shadow,
                format!("{id} is not enabled yet (it is being introduced in shadow mode). To use it, ask {ask}."),
            )));
        }
        if let Some((kind, missing)) = caller.grant.missing(&id, facts.tier) {
            let who = contact
                .map(|c| format!(" To widen the key, ask {c}."))
                .unwrap_or_default();
            return Err(permit.refuse(Refusal::new(kind, format!("{missing}.{who}"))));
        }
        Ok(permit)
    }

    /// Judges a request for `server`'s resources or prompts (`method` is `resources/read`,
    /// `resources/subscribe`, `prompts/get` or `completion/complete`; `target` the URI or
    /// prompt name): the audit log works and the key's scopes cover the whole server. Both
    /// outcomes are audited; a refusal is synced and comes back as the message to show.
    pub(crate) fn access(
        &self,
        caller: &Caller,
        method: &str,
        server: &str,
        target: &str,
    ) -> Result<(), AccessRefused> {
        let unrecorded = |e: &str| AccessRefused::Unrecorded {
            method: method.to_string(),
            target: target.to_string(),
            reason: e.to_string(),
        };
        if let Some(e) = &self.audit_broken {
            return Err(unrecorded(e));
        }
        let refusal = caller.grant.missing_server(server).map(|missing| {
            let who = (self.config.contact.as_deref())
                .map(|c| format!(" To widen the key, ask {c}."))
                .unwrap_or_default();
            AccessRefused::Scope(format!("{missing}.{who}"))
        });
        if let Some(log) = &self.audit {
            let written = log.access(
                &audit::AccessRecord {
                    session: &caller.session,
                    key: &caller.grant.name,
                    profile: caller.profile_name(),
                    method,
                    server,
                    target,
                },
                refusal.as_ref().map(|r| r.to_string()).as_deref(),
            );
            // Nothing is read unrecorded.
            if let (Err(e), None) = (written, &refusal) {
                return Err(unrecorded(&e.to_string()));
            }
        }
        refusal.map_or(Ok(()), Err)
    }

    /// Audits a call that reached no tool: no tool of that name is visible, or its server is
    /// down. `name` is what the caller asked for; nothing was run.
    pub(crate) fn audit_unavailable(&self, caller: &Caller, name: &str, reason: &str) {
        let Some(log) = &self.audit else { return };
        let (server, tool) = name.split_once('/').unwrap_or(("", name));
        let _ = log.call(
            &audit::CallRecord {
                session: &caller.session,
                key: &caller.grant.name,
                subject: (caller.grant.subject.as_ref()).map(Principal::as_str),
                profile: caller.profile_name(),
                surface: caller.surface,
                server,
                tool,
                call_id: &toolgate_core::ids::random_hex(8),
                phase: None,
                visible: false,
                tier: "",
                arguments: &serde_json::Map::new(),
                verdict: Verdict::Unavailable,
                reason: Some(reason.to_string()),
                approved: None,
                outcome: None,
                error: None,
                latency: None,
                result_tokens: None,
                code: Some(RefusalKind::NotVisible.code()),
                run: caller.run.as_deref(),
                upstream_token: None,
            },
            false,
        );
    }

    /// Audits (and logs, redacted) a handle of another principal that `caller` presented:
    /// `handle` says what kind (`cursor`, `operation`, `selectionId`, `piiToken`, `runId`),
    /// `text` is the handle as presented. The refusal itself is the caller's to answer.
    pub(crate) fn audit_foreign(&self, caller: &Caller, handle: &str, text: &str) {
        let principal = caller.principal();
        tracing::warn!(
            principal = %principal,
            handle,
            hint = %toolgate_core::principal::redacted(text),
            "refused a handle made by another principal"
        );
        if let Some(log) = &self.audit {
            log.foreign(&audit::ForeignRecord {
                session: &caller.session,
                key: &caller.grant.name,
                principal: principal.as_str(),
                profile: caller.profile_name(),
                handle,
                handle_text: text,
            });
        }
    }

    /// Audits a request turned away for its key.
    pub(crate) fn audit_rejected_key(&self, rejection: &AuthRejection, path: &str) {
        if let Some(log) = &self.audit {
            let key = match rejection {
                AuthRejection::Revoked(name) => Some(name.as_str()),
                _ => None,
            };
            log.rejected_key(key, &rejection.to_string(), path);
        }
    }

    /// Audits a route decision (`select` with the tool, or `clarify` with the candidates).
    pub(crate) fn audit_route(
        &self,
        caller: &Caller,
        task: &str,
        decision: &str,
        tool: Option<&str>,
        candidates: &[String],
    ) {
        if let Some(log) = &self.audit {
            log.route(&audit::RouteRecord {
                session: &caller.session,
                key: &caller.grant.name,
                profile: caller.profile_name(),
                task,
                decision,
                tool,
                candidates,
            });
        }
    }
}
