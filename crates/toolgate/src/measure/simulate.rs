//! What a whole task costs, direct against guided against code mode: an oracle agent that
//! always picks the expected tools runs each task three ways, and every request of each
//! loop is counted.
//!
//! Requests are OpenAI chat requests: the `tools` array (OpenAI form, as in `report`),
//! then the messages, each counted as its compact JSON. Tool results are left out of every
//! loop; route's and describe_tools' answers are not tool results of the task, so they are in.

use crate::code::tools_for;
use crate::guided::route::{respond, RouteContext};
use crate::guided::schema_view::Detail;
use crate::guided::surface::{EXECUTE, INSTRUCTIONS, ROUTE};
use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use toolgate_core::catalog::{Catalog, LabelledQuery, ToolId, ToolRecord};
use toolgate_route::shape::ProfileView;
use toolgate_route::shape::{openai_form_of_tool, Encoding};
use toolgate_route::shape::{ShapeProfile, SurfaceOptions};
use toolgate_route::RouteIndex;
use toolgate_sandbox::protocol::ToolEntry;

mod code;
mod messages;
pub(crate) use code::code_surface_tokens;
use messages::Loop;
pub(crate) use messages::{result_content, tool_message, user_message};

/// The oracle, as the report states it.
pub(crate) const ORACLE: &str = "For each expected tool, in the order the query file lists them: \
direct: one request, answered with a call of that tool. Guided: one request answered with \
route {task: the task text}; if route did not select that tool, one more request answered \
with route {task: \"server/name\"} (both route answers are real, from toolgate's route code \
on the catalog's index, in the messages that follow); then one request answered with execute \
{selectionId, arguments}. Code: one request answered with describe_tools {tools: the task's \
expected tools as server/name, at most 20 a call} (its answer real, from toolgate's \
describe_tools code, in the messages that follow), then one request answered with \
execute_code {code}, a program that awaits each expected tool in order and returns their \
results (`const r1 = await tools.<server>.<tool>({...}); ... return [r1, ...]`). Every loop \
ends with one request after the last call (the final answer). Arguments are the same in \
every loop: the smallest value of every required field of the original schema. Tool results \
are left out of every loop, which favours direct and guided: there each result enters the \
context and is carried by every later request, while in code mode intermediate results never \
reach the model at all (only what the program returns does, and that is left out too).";

/// How to simulate.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// The tokenizer counted with.
    pub encoding: Encoding,
    /// What the direct loop sends, and what route's `full` detail shows.
    pub profile: ShapeProfile,
    /// Slim and local options, and the meta-tool prefix.
    pub surface: SurfaceOptions,
    /// The detail the oracle asks route for (`signature`, route's default, is not sent).
    pub detail: Detail,
    /// Route's select-or-ask threshold (`guided.route_threshold`).
    pub threshold: f32,
    /// What a route answer puts in the model's context.
    pub result_form: ResultForm,
    /// Whether the code loop's sessions have skills (`code.skills_dir`): they list
    /// propose_skill and a longer instruction.
    pub skills: bool,
    /// Whether route's questions list each step's best tool (`guided.route_steps`).
    pub steps: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            encoding: Encoding::O200k,
            profile: ShapeProfile::Raw,
            surface: SurfaceOptions::default(),
            detail: Detail::Signature,
            threshold: toolgate_route::DEFAULT_THRESHOLD,
            result_form: ResultForm::Mcp,
            skills: false,
            steps: false,
        }
    }
}

/// How a meta-tool answer becomes the `tool` message's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultForm {
    /// The whole MCP `CallToolResult` as toolgate sends it (`content`, `structuredContent`,
    /// `isError` when set), compact JSON: what a client forwarding everything sends.
    Mcp,
    /// The text blocks only, joined (what most clients show the model).
    Text,
}

/// One task's cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimRow {
    /// The query's `id`, else its line number (from 1).
    pub id: String,
    /// Expected tools found in the catalog (the oracle calls each once).
    pub tools: usize,
    /// Input tokens summed over every request of each loop.
    pub direct: usize,
    /// Input tokens of the guided loop.
    pub guided: usize,
    /// The code-mode loop: describe_tools, execute_code, final answer.
    pub code: usize,
    /// guided / direct.
    pub ratio: f64,
    /// code / direct.
    pub code_ratio: f64,
    /// Requests of the direct loop.
    pub direct_requests: usize,
    /// Requests of the guided loop.
    pub guided_requests: usize,
    /// Requests of the code loop.
    pub code_requests: usize,
    /// Route calls; those beyond one per tool are the second route by exact name.
    pub routes: usize,
    /// Expected tools route did not select even by exact name (executed by `tool` name).
    pub unrouted: Vec<String>,
    /// Expected tools the catalog does not have (left out of both loops).
    pub missing: Vec<String>,
}

/// Sums over every task.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SimTotals {
    /// Input tokens of the direct loop, over every task.
    pub direct: usize,
    /// Input tokens of the guided loop, over every task.
    pub guided: usize,
    /// Input tokens of the code loop, over every task.
    pub code: usize,
    /// guided / direct.
    pub ratio: f64,
    /// code / direct.
    pub code_ratio: f64,
    /// code / guided.
    pub code_vs_guided: f64,
}

/// The spread of per-task ratios.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RatioStats {
    /// The smallest guided / direct ratio.
    pub min: f64,
    /// The median guided / direct ratio.
    pub median: f64,
    /// The largest guided / direct ratio.
    pub max: f64,
    /// Tasks where guided costs at least as much as direct.
    pub guided_not_cheaper: usize,
    /// The median of code / direct, and tasks where code costs at least as much as direct,
    /// and at least as much as guided.
    pub code_median: f64,
    /// Tasks where code costs at least as much as direct.
    pub code_not_cheaper: usize,
    /// Tasks where code costs at least as much as guided.
    pub code_not_cheaper_than_guided: usize,
    /// Tool steps, and how many route selected from the task text alone.
    pub steps: usize,
    /// Steps where route selected from the task text alone.
    pub first_route_selected: usize,
}

/// The whole simulation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimReport {
    /// The tokenizer counted with.
    pub encoding: &'static str,
    /// What the direct loop sends.
    pub profile: ShapeProfile,
    /// The detail the oracle asks route for.
    pub detail: &'static str,
    /// What a route answer puts in the model's context.
    pub result_form: ResultForm,
    /// The oracle agent's rule (`ORACLE`).
    pub oracle: &'static str,
    /// What every request of each loop carries before any message: the direct
    /// definitions; the guided meta-tools plus the instructions (system message).
    pub direct_definitions: usize,
    /// Tokens of the guided surface per request (meta-tools and instructions).
    pub guided_surface: usize,
    /// The guided surface with code mode on: the meta-tools plus execute_code and
    /// describe_tools, and the instructions with the code-mode sentence.
    pub code_surface: usize,
    /// One row per task, in the query file's order.
    pub tasks: Vec<SimRow>,
    /// Sums over every task.
    pub totals: SimTotals,
    /// The spread of the per-task ratios.
    pub stats: RatioStats,
}

/// Tokens of the guided surface per request: the meta-tools (OpenAI form) and the
/// instructions as a system message.
pub(crate) fn guided_surface_tokens(enc: Encoding, prefix: &str) -> usize {
    super::report::meta_tool_tokens(enc, prefix)
        + enc.count_json(&json!({"role": "system", "content": INSTRUCTIONS}))
}

/// A selectionId as toolgate makes them (`sel-` and 16 hex digits), derived from the task
/// and step so that runs repeat exactly.
pub fn selection_id(task: usize, step: usize) -> String {
    let digest = Sha256::digest(format!("{task}/{step}").as_bytes());
    format!("sel-{}", hex::encode(&digest[..8]))
}

/// Runs every task both ways. `arguments` gives the arguments of a call from the tool's
/// original input schema (the same in both loops).
pub fn simulate(
    catalog: Arc<Catalog>,
    tasks: &[LabelledQuery],
    opts: &SimOptions,
    arguments: &dyn Fn(&Value) -> Value,
) -> SimReport {
    let enc = opts.encoding;
    let sim = TaskSim::new(catalog, opts, arguments);
    let (direct_definitions, guided_surface, code_surface) =
        (sim.direct_definitions, sim.guided_surface, sim.code_surface);
    let mut steps = 0;
    let mut first_route_selected = 0;
    let tasks: Vec<SimRow> = tasks
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let (row, loops) = sim.run(i, q);
            steps += row.tools;
            first_route_selected += loops.first_selected;
            row
        })
        .collect();
    let direct: usize = tasks.iter().map(|r| r.direct).sum();
    let guided: usize = tasks.iter().map(|r| r.guided).sum();
    let code: usize = tasks.iter().map(|r| r.code).sum();
    let mut ratios: Vec<f64> = tasks.iter().map(|r| r.ratio).collect();
    ratios.sort_by(f64::total_cmp);
    let median = median_of(&ratios);
    let mut code_ratios: Vec<f64> = tasks.iter().map(|r| r.code_ratio).collect();
    code_ratios.sort_by(f64::total_cmp);
    SimReport {
        encoding: enc.name(),
        profile: opts.profile,
        detail: detail_name(opts.detail),
        result_form: opts.result_form,
        oracle: ORACLE,
        direct_definitions,
        guided_surface,
        code_surface,
        stats: RatioStats {
            min: ratios.first().copied().unwrap_or(0.0),
            median,
            max: ratios.last().copied().unwrap_or(0.0),
            guided_not_cheaper: tasks.iter().filter(|r| r.guided >= r.direct).count(),
            code_median: median_of(&code_ratios),
            code_not_cheaper: tasks.iter().filter(|r| r.code >= r.direct).count(),
            code_not_cheaper_than_guided: tasks.iter().filter(|r| r.code >= r.guided).count(),
            steps,
            first_route_selected,
        },
        tasks,
        totals: SimTotals {
            direct,
            guided,
            code,
            ratio: ratio(guided, direct),
            code_ratio: ratio(code, direct),
            code_vs_guided: ratio(code, guided),
        },
    }
}

/// The median of sorted values (0 for none).
fn median_of(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

fn ratio(guided: usize, direct: usize) -> f64 {
    if direct == 0 {
        0.0
    } else {
        guided as f64 / direct as f64
    }
}

fn detail_name(d: Detail) -> &'static str {
    match d {
        Detail::Summary => "summary",
        Detail::Signature => "signature",
        Detail::Full => "full",
        Detail::TypeScript => "typescript",
    }
}

/// What one task's two loops said, beside the row.
pub struct TaskLoops {
    /// The direct loop's messages.
    pub direct: Vec<Value>,
    /// The guided loop's messages.
    pub guided: Vec<Value>,
    /// The code loop's messages.
    pub code: Vec<Value>,
    /// Per-request tokens of each loop.
    pub direct_requests: Vec<usize>,
    /// Per-request tokens of the guided loop.
    pub guided_requests: Vec<usize>,
    /// Per-request tokens of the code loop.
    pub code_requests: Vec<usize>,
    /// Steps where the route with the task text selected the expected tool.
    pub first_selected: usize,
}

/// Everything shared by the tasks of one simulation.
struct TaskSim<'a> {
    catalog: Arc<Catalog>,
    index: RouteIndex,
    view: ProfileView,
    opts: &'a SimOptions,
    arguments: &'a dyn Fn(&Value) -> Value,
    direct_definitions: usize,
    guided_surface: usize,
    code_surface: usize,
    /// Every tool's place in a program's `tools` (safe identifiers), as a run lays it out.
    entries: Vec<ToolEntry>,
}

impl<'a> TaskSim<'a> {
    fn new(
        catalog: Arc<Catalog>,
        opts: &'a SimOptions,
        arguments: &'a dyn Fn(&Value) -> Value,
    ) -> Self {
        let enc = opts.encoding;
        let view = ProfileView::build(catalog.clone(), opts.profile, &opts.surface);
        let direct_definitions = view
            .tools
            .iter()
            .map(|t| {
                let name = t.tool.get("name").and_then(Value::as_str).unwrap_or("");
                enc.count_json(&openai_form_of_tool(name, &t.tool))
            })
            .sum();
        let (entries, _) = tools_for(&catalog);
        Self {
            index: RouteIndex::build(&catalog),
            entries,
            code_surface: code_surface_tokens(enc, &opts.surface.guided_prefix, opts.skills),
            catalog,
            view,
            opts,
            arguments,
            direct_definitions,
            guided_surface: guided_surface_tokens(enc, &opts.surface.guided_prefix),
        }
    }

    fn run(&self, index: usize, q: &LabelledQuery) -> (SimRow, TaskLoops) {
        let enc = self.opts.encoding;
        let catalog = &*self.catalog;
        let cx = RouteContext {
            catalog,
            retriever: &self.index,
            view: Some(&self.view),
            threshold: self.opts.threshold,
            meta_prefix: &self.opts.surface.guided_prefix,
            servers: catalog.servers(),
            shows: None,
            summaries: None,
            learned: None,
            steps: self.opts.steps,
        };
        let mut missing = Vec::new();
        let tools: Vec<&Arc<ToolRecord>> = q
            .expected
            .iter()
            .filter_map(|e| {
                let found = ToolId::parse(e).and_then(|id| catalog.by_id(&id));
                if found.is_none() {
                    missing.push(e.clone());
                }
                found
            })
            .collect();
        let mut direct = Loop::new(enc, self.direct_definitions);
        direct.push(user_message(&q.query));
        for t in &tools {
            direct.request();
            let name = self
                .view
                .tool(&t.id)
                .and_then(|s| s.get("name").and_then(Value::as_str))
                .unwrap_or(&t.exposed);
            direct.call(name, &(self.arguments)(t.input_schema()));
        }
        direct.request();

        let mut guided = Loop::new(enc, self.guided_surface);
        guided.push(user_message(&q.query));
        let prefix = cx.meta_prefix;
        let (route_name, execute_name) = (format!("{prefix}{ROUTE}"), format!("{prefix}{EXECUTE}"));
        let mut routes = 0;
        let mut first_selected = 0;
        let mut unrouted = Vec::new();
        let mut step = 0;
        for t in &tools {
            let mut selection = None;
            for (attempt, task) in [q.query.clone(), t.id.to_string()].iter().enumerate() {
                let mut args = json!({"task": task});
                if self.opts.detail != Detail::Signature {
                    args["detail"] = json!(detail_name(self.opts.detail));
                }
                guided.request();
                let id = guided.call(&route_name, &args);
                routes += 1;
                // Every selectionId the answer offers: the selected tool's, or each
                // candidate's of a question (the model answers one by execute).
                let mut made = Vec::new();
                let (result, selected) = respond(
                    &cx,
                    args.as_object().expect("route arguments"),
                    &mut |tool| {
                        step += 1;
                        let s = selection_id(index, step);
                        made.push((tool.clone(), s.clone()));
                        s
                    },
                );
                guided.push(tool_message(
                    &id,
                    &result_content(&result, self.opts.result_form),
                ));
                if selected.is_some_and(|s| s.id == t.id) {
                    first_selected += usize::from(attempt == 0);
                }
                if let Some((_, sel)) = made.into_iter().find(|(id, _)| *id == t.id) {
                    selection = Some(sel);
                    break;
                }
            }
            let arguments = (self.arguments)(t.input_schema());
            let call = match selection {
                Some(sel) => json!({"selectionId": sel, "arguments": arguments}),
                None => {
                    unrouted.push(t.id.to_string());
                    json!({"tool": t.id.to_string(), "arguments": arguments})
                }
            };
            guided.request();
            guided.call(&execute_name, &call);
        }
        guided.request();

        let code = self.code_loop(q, &tools);

        let row = SimRow {
            id: match &q.id {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => (index + 1).to_string(),
            },
            tools: tools.len(),
            direct: direct.total(),
            guided: guided.total(),
            code: code.total(),
            ratio: ratio(guided.total(), direct.total()),
            code_ratio: ratio(code.total(), direct.total()),
            direct_requests: direct.requests.len(),
            guided_requests: guided.requests.len(),
            code_requests: code.requests.len(),
            routes,
            unrouted,
            missing,
        };
        let loops = TaskLoops {
            direct_requests: direct.requests.clone(),
            guided_requests: guided.requests.clone(),
            code_requests: code.requests.clone(),
            direct: direct.messages,
            guided: guided.messages,
            code: code.messages,
            first_selected,
        };
        (row, loops)
    }
}

/// One task's two loops, message by message (for tests and inspection).
pub fn simulate_task(
    catalog: Arc<Catalog>,
    task: &LabelledQuery,
    opts: &SimOptions,
    arguments: &dyn Fn(&Value) -> Value,
) -> (SimRow, TaskLoops) {
    TaskSim::new(catalog, opts, arguments).run(0, task)
}
