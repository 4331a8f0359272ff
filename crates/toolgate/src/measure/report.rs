//! Reports over a catalog: what each surface costs in tokens, and what lint finds.
//! Library functions over `&Catalog`, so the CLI runs them on a catalog file and the
//! gateway on its live catalog.

use crate::guided::surface::{meta_tools, INSTRUCTIONS};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use toolgate_core::catalog::Catalog;
use toolgate_route::shape::{lint_schema, Rule};
use toolgate_route::shape::{listing, ShapeProfile, SurfaceOptions};
use toolgate_route::shape::{openai_form, Encoding, FormTokens};

/// Token totals of the four surfaces in one form.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SurfaceTotals {
    /// Every tool as the upstreams sent it.
    pub direct: usize,
    /// Slim direct mode.
    pub slim: usize,
    /// Slim plus the local-model-safe rewrite.
    pub local: usize,
    /// The three meta-tools plus the standing instructions.
    pub guided: usize,
    /// A guided session with code mode on, as it lists itself: the meta-tools plus
    /// execute_code and describe_tools (and propose_skill with skills), and the
    /// instructions with code mode's (and skills') sentences.
    pub code: usize,
}

impl SurfaceTotals {
    /// Per cent saved against `direct` by each other surface (0 when direct is 0).
    pub fn savings(&self) -> BTreeMap<&'static str, f64> {
        let pct = |x: usize| {
            if self.direct == 0 {
                0.0
            } else {
                ((1.0 - x as f64 / self.direct as f64) * 1000.0).round() / 10.0
            }
        };
        BTreeMap::from([
            ("slim", pct(self.slim)),
            ("local", pct(self.local)),
            ("guided", pct(self.guided)),
            ("code", pct(self.code)),
        ])
    }
}

/// The largest tool of a server, by direct OpenAI-form tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Largest {
    /// The upstream tool name (the first one wins a tie).
    pub tool: String,
    /// Its direct definition tokens, OpenAI form.
    pub tokens: usize,
}

/// One server's tools under each listing surface.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ServerRow {
    /// The server's name.
    pub server: String,
    /// How many of the catalog's tools this server has.
    pub tools: usize,
    /// Sums over the server's tools, per surface, in both forms.
    pub direct: FormTokens,
    /// Under the slim profile.
    pub slim: FormTokens,
    /// Under the local profile.
    pub local: FormTokens,
    /// Where a server's cost concentrates: the first tool to look at when slimming.
    pub largest: Largest,
}

/// One tool's definition cost under each listing surface (OpenAI form).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolRow {
    /// The server's name.
    pub server: String,
    /// The tool's upstream name.
    pub tool: String,
    /// Tokens as its upstream wrote it.
    pub direct: usize,
    /// Tokens under the slim profile.
    pub slim: usize,
    /// Tokens under the local profile.
    pub local: usize,
}

/// What each surface costs. `totals` is OpenAI form (what `--json` users script
/// against); `totals_mcp` is the MCP `tools/list` form. Listing surfaces total to
/// the sum of their server rows; guided is the same whatever the catalog holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokenReport {
    /// The tiktoken name of the encoding counted with.
    pub encoding: &'static str,
    /// Tools in the catalog.
    pub tools: usize,
    /// One row per server, sorted by name.
    pub servers: Vec<ServerRow>,
    /// One row per tool, in catalog order (the dashboard's per-tool view).
    pub tool_rows: Vec<ToolRow>,
    /// What each surface costs, OpenAI form.
    pub totals: SurfaceTotals,
    /// What each surface costs, MCP `tools/list` form.
    pub totals_mcp: SurfaceTotals,
    /// Per cent saved against direct, OpenAI form.
    pub savings: BTreeMap<&'static str, f64>,
    /// The guided surface's parts: meta-tool definitions and instructions (OpenAI form).
    pub guided_tools: usize,
    /// The guided instructions (system message).
    pub guided_instructions: usize,
    /// The code-mode surface's parts, the same way; `code_skills` says whether skills
    /// were counted in (a configuration with `code.skills_dir`).
    pub code_tools: usize,
    /// The code-mode instructions.
    pub code_instructions: usize,
    /// Whether skills were counted in the code-mode surface.
    pub code_skills: bool,
}

/// A code-mode session's surface: its tools' tokens (OpenAI form, MCP form) and its
/// instructions' text. The report's code column and the simulation both count this.
pub(crate) fn code_surface(enc: Encoding, prefix: &str, skills: bool) -> (usize, usize, String) {
    let tools = crate::guided::surface::session_tools(prefix, true, skills);
    let mcp = tools.iter().map(|t| enc.count_json(t)).sum();
    (
        definition_tokens(enc, &tools),
        mcp,
        crate::guided::surface::instructions(true, skills),
    )
}

impl TokenReport {
    /// The report, the code column without skills (see [`TokenReport::build_with`]).
    pub fn build(catalog: &Catalog, enc: Encoding, opts: &SurfaceOptions) -> Self {
        Self::build_with(catalog, enc, opts, false)
    }

    /// The report; `skills`: the code column counts what a session lists with skills on.
    pub fn build_with(
        catalog: &Catalog,
        enc: Encoding,
        opts: &SurfaceOptions,
        skills: bool,
    ) -> Self {
        let raw = listing(catalog, ShapeProfile::Raw, opts);
        let slim = listing(catalog, ShapeProfile::Slim, opts);
        let local = listing(catalog, ShapeProfile::Local, opts);
        let mut rows: BTreeMap<String, ServerRow> = BTreeMap::new();
        let mut tool_rows = Vec::with_capacity(raw.len());
        for ((r, s), l) in raw.iter().zip(&slim).zip(&local) {
            let row = rows
                .entry(r.id.server.clone())
                .or_insert_with(|| ServerRow {
                    server: r.id.server.clone(),
                    ..Default::default()
                });
            let name = |t: &serde_json::Map<String, Value>| {
                t.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let direct = FormTokens::of_tool(enc, &name(&r.tool), &r.tool);
            let slim = FormTokens::of_tool(enc, &name(&s.tool), &s.tool);
            let local = FormTokens::of_tool(enc, &name(&l.tool), &l.tool);
            row.tools += 1;
            row.direct += direct;
            row.slim += slim;
            row.local += local;
            tool_rows.push(ToolRow {
                server: r.id.server.clone(),
                tool: r.id.name.clone(),
                direct: direct.openai,
                slim: slim.openai,
                local: local.openai,
            });
            if direct.openai > row.largest.tokens {
                row.largest = Largest {
                    tool: r.id.name.clone(),
                    tokens: direct.openai,
                };
            }
        }
        let servers: Vec<ServerRow> = rows.into_values().collect();
        let meta = meta_tools(&opts.guided_prefix);
        let guided_tools = meta_tool_tokens(enc, &opts.guided_prefix);
        let guided_mcp: usize = meta.iter().map(|t| enc.count_json(t)).sum();
        let guided_instructions = enc.count(INSTRUCTIONS);
        let (code_tools, code_mcp, code_text) = code_surface(enc, &opts.guided_prefix, skills);
        let code_instructions = enc.count(&code_text);
        let sum = |f: &dyn Fn(&ServerRow) -> usize| servers.iter().map(f).sum::<usize>();
        let totals = SurfaceTotals {
            direct: sum(&|r| r.direct.openai),
            slim: sum(&|r| r.slim.openai),
            local: sum(&|r| r.local.openai),
            guided: guided_tools + guided_instructions,
            code: code_tools + code_instructions,
        };
        let totals_mcp = SurfaceTotals {
            direct: sum(&|r| r.direct.mcp),
            slim: sum(&|r| r.slim.mcp),
            local: sum(&|r| r.local.mcp),
            guided: guided_mcp + guided_instructions,
            code: code_mcp + code_instructions,
        };
        Self {
            encoding: enc.name(),
            tools: catalog.len(),
            servers,
            tool_rows,
            savings: totals.savings(),
            totals,
            totals_mcp,
            guided_tools,
            guided_instructions,
            code_tools,
            code_instructions,
            code_skills: skills,
        }
    }
}

/// One lint finding, located.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The server's name.
    pub server: String,
    /// The tool's upstream name.
    pub tool: String,
    /// JSON pointer into the tool's input schema (as the profile shows it).
    pub pointer: String,
    /// The rule that found it.
    pub rule: Rule,
    /// What is wrong, in words.
    pub why: String,
}

/// Every finding in a catalog under one profile, with counts by rule (every rule is
/// listed, zeros included, so two runs compare line by line).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LintReport {
    /// Which schemas were checked.
    pub profile: ShapeProfile,
    /// Tools checked, and how many of them had at least one finding.
    pub tools: usize,
    /// Tools with at least one finding.
    pub tools_with_findings: usize,
    /// Findings by rule id (every rule, zeros included).
    pub counts: BTreeMap<&'static str, usize>,
    /// Every finding, in catalog order.
    pub findings: Vec<Finding>,
}

impl LintReport {
    /// Lints every tool of `catalog` as `profile` shows it.
    pub fn build(catalog: &Catalog, profile: ShapeProfile, opts: &SurfaceOptions) -> Self {
        let mut findings = Vec::new();
        let mut tools_with_findings = 0;
        for t in listing(catalog, profile, opts) {
            let empty = Value::Object(Default::default());
            let schema = t.tool.get("inputSchema").unwrap_or(&empty);
            let found = lint_schema(schema, &opts.local);
            tools_with_findings += usize::from(!found.is_empty());
            findings.extend(found.into_iter().map(|f| Finding {
                server: t.id.server.clone(),
                tool: t.id.name.clone(),
                pointer: f.pointer,
                rule: f.rule,
                why: f.why,
            }));
        }
        let mut counts: BTreeMap<&'static str, usize> =
            Rule::ALL.iter().map(|r| (r.id(), 0)).collect();
        for f in &findings {
            *counts.entry(f.rule.id()).or_default() += 1;
        }
        Self {
            profile,
            tools: catalog.len(),
            tools_with_findings,
            counts,
            findings,
        }
    }
}

/// Tokens of the guided meta-tool definitions in OpenAI `tools` form (what the token
/// report and the whole-task simulation both charge per request).
pub(crate) fn meta_tool_tokens(enc: Encoding, prefix: &str) -> usize {
    definition_tokens(enc, &meta_tools(prefix))
}

fn definition_tokens(enc: Encoding, tools: &[Value]) -> usize {
    tools
        .iter()
        .map(|t| {
            let name = t["name"].as_str().unwrap_or_default();
            enc.count_json(&openai_form(
                name,
                t["description"].as_str(),
                &t["inputSchema"],
            ))
        })
        .sum()
}
