//! The TOML file as written (`toolgate.toml`), before validation.
//!
//! ```toml
//! [gateway]
//! listen = "127.0.0.1:8377"   # HTTP address; loopback by default
//! mode = "guided"             # guided | direct | auto
//!
//! [upstreams.github]
//! command = "github-mcp-server"
//! args = ["stdio"]
//! env = { GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_TOKEN}" }
//!
//! [upstreams.docs]
//! url = "http://127.0.0.1:9000/mcp"
//! headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
//! call_timeout_secs = 120
//! max_message_bytes = 16777216  # the largest answer accepted (default 16 MiB)
//! protocol = "auto"              # or "2026-07-28" (prefer it) or "2025-11-25" (only the older era)
//!
//! [direct]
//! profile = "slim"            # raw | slim | local: what direct mode shows of each tool
//! max_result_tokens = 25000   # a longer result is cut at a clean boundary, with a note
//! [direct.slim]               # SlimOptions (docs/shape.md); every key optional
//! description_max = 300
//! ```

use super::{invalid, secs, ConfigError, Result};
use super::{Config, DirectConfig, GatewayConfig, GuidedConfig, Mode};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use toolgate_route::shape::{LocalOptions, ShapeProfile, SlimOptions};
use toolgate_route::RouteExamples;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    pub gateway: RawGateway,
    #[serde(default)]
    pub guided: RawGuided,
    #[serde(default)]
    pub direct: RawDirect,
    #[serde(default)]
    pub code: super::code::RawCode,
    #[serde(default)]
    pub upstreams: BTreeMap<String, super::upstream::RawUpstream>,
    /// Profiles, keys, per-tool rules, approval and audit (see `policy::config`).
    #[serde(default)]
    pub policy: crate::policy::config::RawPolicy,
    /// Where handles are kept (see `config::store`).
    #[serde(default)]
    pub store: super::store::RawStore,
    /// Span export (see `config::telemetry`).
    #[serde(default)]
    pub telemetry: super::telemetry::RawTelemetry,
    /// Access tokens from an authorization server (see `policy::oauth::config`).
    #[serde(default)]
    pub auth: crate::policy::oauth::config::RawAuth,
}

/// `[direct]`: the profile and its options (unknown keys refused at every level).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDirect {
    pub profile: Option<ShapeProfile>,
    pub slim: Option<SlimOptions>,
    pub local: Option<LocalOptions>,
    /// A direct call's result past this many tokens is cut (default 25,000).
    pub max_result_tokens: Option<usize>,
}

impl RawDirect {
    fn validate(self, file: &Path) -> Result<DirectConfig> {
        let slim = self.slim.unwrap_or_default();
        let local = self.local.unwrap_or_default();
        let f = file.display();
        if !(0.0..=1.0).contains(&slim.boilerplate_min_share) {
            invalid!(
                "{f}: direct.slim.boilerplate_min_share = {}: use a number from 0 to 1",
                slim.boilerplate_min_share
            );
        }
        for (key, what) in [
            (slim.description_max, "description_max"),
            (slim.property_description_max, "property_description_max"),
        ] {
            if key < 20 {
                invalid!("{f}: direct.slim.{what} = {key}: use at least 20 characters");
            }
        }
        for (key, o) in &slim.tools {
            if let Some(name) = &o.name {
                if !toolgate_core::catalog::names::is_valid(name) {
                    invalid!("{f}: direct.slim.tools.{key:?}.name = {name:?}: use 1 to 64 letters, digits, '_' or '-'");
                }
            }
        }
        if local.max_union < 2 {
            invalid!(
                "{f}: direct.local.max_union = {}: use at least 2",
                local.max_union
            );
        }
        let max_result_tokens = self
            .max_result_tokens
            .unwrap_or(super::DIRECT_MAX_RESULT_TOKENS);
        if max_result_tokens < 200 {
            invalid!(
                "{f}: direct.max_result_tokens = {max_result_tokens}: use at least 200 tokens"
            );
        }
        Ok(DirectConfig {
            profile: self.profile.unwrap_or_default(),
            slim,
            local,
            max_result_tokens,
        })
    }
}

/// `guided.route_model`: a folder with `config.json`, `tokenizer.json` and
/// `model.safetensors` (relative to the config file's folder), in a build with `embed`.
fn model_dir(file: &Path, dir: &Path) -> Result<PathBuf> {
    let full = super::relative_to_config(file, dir);
    if !cfg!(feature = "embed") {
        invalid!(
            "{}: guided.route_model is set, but this toolgate was built without the `embed` \
             feature: build it with `cargo build --release -p toolgate-cli --features embed`, \
             or remove the key",
            file.display()
        );
    }
    for name in ["config.json", "tokenizer.json", "model.safetensors"] {
        if !full.join(name).is_file() {
            invalid!(
                "{}: guided.route_model = {:?}: {} is missing; fetch the model with \
                 scripts/fetch-embed-model.sh DIR and give the folder it prints",
                file.display(),
                dir.display(),
                full.join(name).display()
            );
        }
    }
    Ok(full)
}

/// `guided.route_examples`: a labelled query file, relative to the config file's folder.
fn load_examples(file: &Path, path: &Path) -> Result<RouteExamples> {
    let full = super::relative_to_config(file, path);
    let queries = toolgate_core::catalog::load_queries_file(&full).map_err(|e| {
        ConfigError::read(
            format!(
                "{}: guided.route_examples = {:?}: give a file of JSON lines \
                 {{\"query\": \"...\", \"expected\": [\"server/tool\"]}} (relative to the config file)",
                file.display(),
                path.display()
            ),
            e,
        )
    })?;
    Ok(RouteExamples::from_queries(&queries))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGuided {
    pub budget_tokens: Option<usize>,
    #[serde(default)]
    pub tool_budgets: HashMap<String, usize>,
    pub wait_secs: Option<f64>,
    pub result_ttl_secs: Option<f64>,
    pub route_threshold: Option<f32>,
    #[serde(default)]
    pub pinned: Vec<String>,
    #[serde(default)]
    pub expand_selected: bool,
    pub route_examples: Option<PathBuf>,
    pub route_model: Option<PathBuf>,
    /// List each step's best tool in a question about a task of several steps.
    pub route_steps: Option<bool>,
    /// Tokens a session may be sent (results and definitions) before answers shrink.
    pub session_budget_tokens: Option<usize>,
    /// `[guided.learning]`: what route learns from the models' choices.
    pub learning: Option<RawLearning>,
}

/// `[guided.learning]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLearning {
    pub mode: Option<toolgate_route::LearningMode>,
    pub min_agreement: Option<usize>,
    pub max_per_tool: Option<usize>,
    pub max_per_principal: Option<usize>,
    pub expiry_days: Option<f64>,
}

impl RawLearning {
    fn validate(self, file: &Path) -> Result<toolgate_route::LearningSettings> {
        let d = toolgate_route::LearningSettings::default();
        let positive = |v: Option<usize>, default: usize, key: &str| match v {
            Some(0) => invalid!(
                "{}: guided.learning.{key} = 0: use at least 1",
                file.display()
            ),
            Some(n) => Ok(n),
            None => Ok(default),
        };
        let expiry_ms = match self.expiry_days {
            Some(days) if !(days > 0.0 && days <= 3650.0) => invalid!(
                "{}: guided.learning.expiry_days = {days}: use a number of days above 0 and at most 3650",
                file.display()
            ),
            Some(days) => (days * 86_400_000.0) as u64,
            None => d.expiry_ms,
        };
        Ok(toolgate_route::LearningSettings {
            mode: self.mode.unwrap_or(d.mode),
            min_agreement: positive(self.min_agreement, d.min_agreement, "min_agreement")?,
            max_per_tool: positive(self.max_per_tool, d.max_per_tool, "max_per_tool")?,
            max_per_principal: positive(
                self.max_per_principal,
                d.max_per_principal,
                "max_per_principal",
            )?,
            expiry_ms,
        })
    }
}

impl RawGuided {
    fn validate(self, file: &Path) -> Result<GuidedConfig> {
        let d = GuidedConfig::default();
        let budget = self.budget_tokens.unwrap_or(d.budget_tokens);
        if budget < 200 {
            invalid!(
                "{}: guided.budget_tokens = {budget}: use at least 200",
                file.display()
            );
        }
        for (k, v) in &self.tool_budgets {
            if !k.contains('/') || *v < 200 {
                invalid!("{}: guided.tool_budgets.{k:?} = {v}: keys are \"server/tool\", values at least 200", file.display());
            }
        }
        for p in &self.pinned {
            if !p.contains('/') {
                invalid!(
                    "{}: guided.pinned entry {p:?}: write \"server/tool\"",
                    file.display()
                );
            }
        }
        let route_model = match &self.route_model {
            Some(dir) => Some(model_dir(file, dir)?),
            None => None,
        };
        // Example tasks make route surer of itself, and the hybrid's fused scores have a
        // threshold of their own (0.94 both, chosen on the tuning splits): the default
        // follows.
        let default_threshold = match (&self.route_examples, &route_model) {
            (None, None) => d.route_threshold,
            _ => toolgate_route::EXAMPLES_THRESHOLD,
        };
        let threshold = self.route_threshold.unwrap_or(default_threshold);
        if !(0.0..=1.0).contains(&threshold) {
            invalid!(
                "{}: guided.route_threshold = {threshold}: use a number from 0 to 1",
                file.display()
            );
        }
        if let Some(b) = self.session_budget_tokens.filter(|b| *b < 1000) {
            invalid!(
                "{}: guided.session_budget_tokens = {b}: use at least 1000 (tokens a session may be sent before its answers shrink), or leave it out for no budget",
                file.display()
            );
        }
        Ok(GuidedConfig {
            session_budget_tokens: self.session_budget_tokens,
            budget_tokens: budget,
            tool_budgets: self.tool_budgets,
            wait: match self.wait_secs {
                Some(_) => secs(self.wait_secs, 10.0, file, "guided.wait_secs")?,
                None => d.wait,
            },
            result_ttl: match self.result_ttl_secs {
                Some(_) => secs(self.result_ttl_secs, 600.0, file, "guided.result_ttl_secs")?,
                None => d.result_ttl,
            },
            route_threshold: threshold,
            pinned: self.pinned,
            expand_selected: self.expand_selected,
            route_examples: match &self.route_examples {
                Some(path) => Arc::new(load_examples(file, path)?),
                None => d.route_examples,
            },
            route_model,
            route_steps: self.route_steps.unwrap_or(d.route_steps),
            learning: self.learning.unwrap_or_default().validate(file)?,
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGateway {
    pub listen: Option<String>,
    pub mode: Option<Mode>,
    pub auto_threshold_tokens: Option<usize>,
    pub meta_prefix: Option<String>,
    pub startup_wait_ms: Option<u64>,
    pub max_body_bytes: Option<usize>,
    pub list_ttl_ms: Option<u64>,
    pub worker_threads: Option<usize>,
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Serve `/metrics` and `/ui` to peers that are not on loopback.
    #[serde(default)]
    pub admin_allow_remote: bool,
    /// `[gateway.limits]`: timeouts, connection and session caps, the shutdown bound.
    #[serde(default)]
    pub limits: super::limits::RawLimits,
}

impl RawConfig {
    pub(crate) fn validate(self, file: &Path) -> Result<Config> {
        let defaults = GatewayConfig::default();
        let g = self.gateway;
        let listen = match g.listen {
            Some(l) => l.parse().map_err(|_| {
                ConfigError::Invalid(format!(
                    "{}: gateway.listen = {l:?} is not an address: write IP:PORT, e.g. \"127.0.0.1:8377\"",
                    file.display()
                ))
            })?,
            None => defaults.listen,
        };
        if g.worker_threads == Some(0) {
            invalid!(
                "{}: gateway.worker_threads = 0: write 1 or more, or leave it out (one fewer than the machine's cores, at least 1)",
                file.display()
            );
        }
        let gateway = GatewayConfig {
            listen,
            mode: g.mode.unwrap_or(defaults.mode),
            auto_threshold_tokens: g
                .auto_threshold_tokens
                .unwrap_or(defaults.auto_threshold_tokens),
            meta_prefix: g.meta_prefix.unwrap_or_default(),
            startup_wait: g
                .startup_wait_ms
                .map_or(defaults.startup_wait, Duration::from_millis),
            max_body_bytes: g.max_body_bytes.unwrap_or(defaults.max_body_bytes),
            list_ttl_ms: g.list_ttl_ms.unwrap_or(defaults.list_ttl_ms),
            worker_threads: g.worker_threads,
            allowed_hosts: g.allowed_hosts,
            admin_allow_remote: g.admin_allow_remote,
            limits: g.limits.validate(file)?,
        };
        let mut upstreams = BTreeMap::new();
        for (name, raw) in self.upstreams {
            let key = format!("upstreams.{name}");
            upstreams.insert(name.clone(), raw.validate(&name, file, &key)?);
        }
        let servers: Vec<&str> = upstreams.keys().map(String::as_str).collect();
        let code = self.code.validate(file, &servers)?;
        if code.skills_dir.is_some() && upstreams.contains_key(crate::skills::SKILLS_SERVER) {
            invalid!(
                "{}: upstreams.{}: that name is reserved for skills while code.skills_dir is set: rename the upstream",
                file.display(),
                crate::skills::SKILLS_SERVER
            );
        }
        let mut policy = self.policy.validate(file)?;
        if let Some(oauth) = self.auth.oauth {
            policy.oauth = Some(oauth.validate(file, gateway.listen, &policy.profiles)?);
        }
        for p in &code.profiles {
            if !policy.profiles.contains_key(p) {
                invalid!(
                    "{}: code.profiles: {p:?} is not a profile: define [policy.profiles.{p}] or remove it from the list",
                    file.display()
                );
            }
        }
        for k in &code.keys {
            if policy.key(k).is_none() {
                invalid!(
                    "{}: code.keys: {k:?} is not a key: define [policy.keys.{k}] or remove it from the list",
                    file.display()
                );
            }
        }
        Ok(Config {
            source: Some(file.to_path_buf()),
            gateway,
            guided: self.guided.validate(file)?,
            direct: self.direct.validate(file)?,
            code,
            upstreams,
            policy,
            store: self.store.validate(file)?,
            telemetry: self.telemetry.validate()?,
            warnings: Vec::new(),
        })
    }
}
