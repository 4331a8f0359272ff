//! The code-mode loop of the simulation: describe_tools for the task's tools, one
//! execute_code whose program makes every call, then the final answer.

use super::{result_content, tool_message, user_message, Loop, TaskSim};
use crate::guided::describe::{describe, MAX_TOOLS};
use crate::guided::surface::{DESCRIBE_TOOLS, EXECUTE_CODE};
use serde_json::{json, Value};
use std::sync::Arc;
use toolgate_core::catalog::{LabelledQuery, ToolRecord};
use toolgate_route::shape::Encoding;
use toolgate_sandbox::protocol::ToolEntry;

/// Tokens of the surface a guided session with code mode on carries per request, as the
/// session lists it (`measure::report::code_surface`: every meta-tool including
/// execute_code and describe_tools, propose_skill with `skills`), and its instructions
/// as a system message.
pub(crate) fn code_surface_tokens(enc: Encoding, prefix: &str, skills: bool) -> usize {
    let (tools, _, instructions) = crate::measure::report::code_surface(enc, prefix, skills);
    tools + enc.count_json(&json!({"role": "system", "content": instructions}))
}

/// The oracle's execute_code program: each call awaited in order, the results returned.
/// Deterministic, so runs repeat exactly.
pub(crate) fn oracle_program(calls: &[(&ToolEntry, Value)]) -> String {
    let mut code = String::new();
    for (i, (e, args)) in calls.iter().enumerate() {
        code.push_str(&format!(
            "const r{} = await tools.{}.{}({args});\n",
            i + 1,
            e.server_ident,
            e.tool_ident
        ));
    }
    let results: Vec<String> = (1..=calls.len()).map(|i| format!("r{i}")).collect();
    code.push_str(&format!("return [{}];", results.join(", ")));
    code
}

impl TaskSim<'_> {
    /// Code mode: describe_tools for the task's tools, one execute_code whose program makes
    /// every call, then the final answer.
    pub(super) fn code_loop(&self, q: &LabelledQuery, tools: &[&Arc<ToolRecord>]) -> Loop {
        let enc = self.opts.encoding;
        let prefix = &self.opts.surface.guided_prefix;
        let mut code = Loop::new(enc, self.code_surface);
        code.push(user_message(&q.query));
        let entry = |t: &ToolRecord| {
            self.entries
                .iter()
                .find(|e| e.server == t.id.server && e.tool == t.id.name)
        };
        let calls: Vec<(&ToolEntry, Value)> = tools
            .iter()
            .filter_map(|t| Some((entry(t)?, (self.arguments)(t.input_schema()))))
            .collect();
        if !calls.is_empty() {
            let mut names: Vec<String> = Vec::new();
            for t in tools {
                let name = t.id.to_string();
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            for chunk in names.chunks(MAX_TOOLS) {
                code.request();
                let id = code.call(
                    &format!("{prefix}{DESCRIBE_TOOLS}"),
                    &json!({"tools": chunk}),
                );
                let asked: Vec<&str> = chunk.iter().map(String::as_str).collect();
                let answer = describe(&self.catalog, &self.entries, &asked, "typescript");
                code.push(tool_message(
                    &id,
                    &result_content(&answer, self.opts.result_form),
                ));
            }
            code.request();
            let program = oracle_program(&calls);
            code.call(
                &format!("{prefix}{EXECUTE_CODE}"),
                &json!({"code": program}),
            );
            // Its answer is the program's result: a tool result of the task, left out.
        }
        code.request();
        code
    }
}
