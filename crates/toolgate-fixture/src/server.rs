//! The MCP server: a hand-written [`ServerHandler`] over the selected catalog tools.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use crate::catalog::FixtureTool;
use crate::instance::minimal_instance;
use crate::knobs::{strip_knobs, Knobs, KnobsFile};
use crate::payload::{echo, sized_text};

/// Exit status of a `_crash` call, distinct from clap's 2 and `exit-at-start`'s 3.
pub const CRASH_EXIT_CODE: i32 = 70;

/// Serves a fixed list of catalog tools. Cloned once per HTTP session; clones share state.
#[derive(Debug, Clone)]
pub struct FixtureServer {
    /// The served tools in catalog order; `tools/list` pages walk this list.
    tools: Arc<[FixtureTool]>,
    /// Names hidden by `_toggle_tool`, shared by every session so a toggle is global.
    hidden: Arc<Mutex<HashSet<String>>>,
    /// Per-tool default knobs from `--knobs`.
    knobs: Arc<KnobsFile>,
    /// Tools per `tools/list` page; `None` answers everything in one page.
    page_size: Option<usize>,
    /// `serverInfo.name`: the catalog server served, so logs and gateways can tell fixtures apart.
    name: String,
    /// Speak only MCP 2026-07-28 (refuse `initialize`), to play a modern-only server.
    modern_only: bool,
    /// `--fault malformed-tools`: every `tools/list` page lists unusable tools too.
    malformed_tools: bool,
    /// `--fault flood-notifications`: a burst of notifications before every call's answer.
    flood_notifications: bool,
    /// `--demo --stateful`: the demo's own answers instead of echoes, shared by sessions.
    world: Option<Arc<crate::demo::DemoWorld>>,
    /// The least severe level `_log` messages are sent at, as the last `logging/setLevel`
    /// said (a rank, 0 = debug); the `_log` knob sends at info (1), so a level above info
    /// silences it, which shows whether a client's setLevel reached this server.
    log_floor: Arc<std::sync::atomic::AtomicU8>,
}

impl FixtureServer {
    /// A server for `tools`, answering `serverInfo.name = name`.
    pub fn new(
        name: impl Into<String>,
        tools: Vec<FixtureTool>,
        knobs: KnobsFile,
        page_size: Option<usize>,
    ) -> Self {
        Self {
            tools: tools.into(),
            hidden: Arc::default(),
            knobs: Arc::new(knobs),
            page_size: page_size.filter(|size| *size > 0),
            name: name.into(),
            modern_only: false,
            malformed_tools: false,
            flood_notifications: false,
            world: None,
            log_floor: Arc::default(),
        }
    }

    /// Answer with the demo's world (see [`crate::demo`]) instead of echoes.
    pub fn stateful(mut self, on: bool) -> Self {
        self.world = on.then(|| Arc::new(crate::demo::DemoWorld::new()));
        self
    }

    /// This server speaks only 2026-07-28: `initialize` gets -32022.
    pub fn modern_only(mut self, on: bool) -> Self {
        self.modern_only = on;
        self
    }

    /// Every `tools/list` page also lists unusable tools (`--fault malformed-tools`).
    pub fn malformed_tools(mut self, on: bool) -> Self {
        self.malformed_tools = on;
        self
    }

    /// A burst of notifications before every call's answer (`--fault flood-notifications`).
    pub fn flood_notifications(mut self, on: bool) -> Self {
        self.flood_notifications = on;
        self
    }

    /// Whether `tools/list` pages carry the `malformed-tools` extras.
    pub fn lists_malformed_tools(&self) -> bool {
        self.malformed_tools
    }

    /// The tools `tools/list` currently shows.
    pub fn visible_tools(&self) -> Vec<&FixtureTool> {
        let hidden = self
            .hidden
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        self.tools
            .iter()
            .filter(|tool| !hidden.contains(tool.name()))
            .collect()
    }

    /// The raw (file) form of a served tool, by name, hidden or not.
    pub fn raw_tool(&self, name: &str) -> Option<&Arc<JsonObject>> {
        self.tools
            .iter()
            .find(|tool| tool.name() == name)
            .map(|tool| &tool.raw)
    }

    fn find_visible(&self, name: &str) -> Option<FixtureTool> {
        self.visible_tools()
            .into_iter()
            .find(|tool| tool.name() == name)
            .cloned()
    }

    /// Flips a tool's visibility; false when no served tool has that name.
    fn toggle(&self, name: &str) -> bool {
        if !self.tools.iter().any(|tool| tool.name() == name) {
            return false;
        }
        let mut hidden = self
            .hidden
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if !hidden.remove(name) {
            hidden.insert(name.to_owned());
        }
        true
    }

    /// Runs the knobs' side effects (log, roots asked, progress, delay, list change) in
    /// that order.
    async fn side_effects(
        &self,
        knobs: &Knobs,
        context: &RequestContext<RoleServer>,
    ) -> Option<String> {
        match (&knobs.log, knobs.log_after_ms) {
            (Some(data), None) => send_log(&context.peer, data.clone(), &self.log_floor).await,
            (Some(data), Some(ms)) => {
                let (peer, data) = (context.peer.clone(), data.clone());
                let floor = self.log_floor.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                    send_log(&peer, data, &floor).await;
                });
            }
            (None, _) => {}
        }
        if knobs.ask_roots {
            // Roots are deprecated (SEP-2577), but servers still ask for them.
            #[expect(
                deprecated,
                reason = "SEP-2577 deprecates logging, sampling and roots; peers still send them"
            )]
            let asked = context.peer.list_roots().await;
            if let Err(error) = asked {
                tracing::debug!(%error, "roots/list was refused");
            }
        }
        self.wait(knobs, context).await;
        if knobs.list_changed {
            if let Some(name) = &knobs.toggle_tool {
                if !self.toggle(name) {
                    return Some(format!("_toggle_tool: no served tool is named {name:?}"));
                }
            }
            if let Err(error) = context.peer.notify_tool_list_changed().await {
                tracing::debug!(%error, "could not send tools/list_changed");
            }
        }
        None
    }

    /// Sleeps `_delay_ms`, split into `_progress` steps each followed by a notification
    /// (no sleep at all when `_delay_ms` is 0).
    async fn wait(&self, knobs: &Knobs, context: &RequestContext<RoleServer>) {
        let token = context.meta.get_progress_token();
        let steps = match &token {
            Some(_) if knobs.progress > 0 => knobs.progress,
            _ => 1,
        };
        let step = Duration::from_millis(knobs.delay_ms) / u32::try_from(steps).unwrap_or(u32::MAX);
        for done in 1..=steps {
            if !pause(step, &context.ct).await {
                return;
            }
            if let (Some(token), true) = (&token, knobs.progress > 0) {
                let param = ProgressNotificationParam::new(token.clone(), done as f64)
                    .with_total(steps as f64)
                    .with_message(format!("step {done} of {steps}"));
                if let Err(error) = context.peer.notify_progress(param).await {
                    tracing::debug!(%error, "could not send a progress notification");
                }
            }
        }
    }
}

impl ServerHandler for FixtureServer {
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        match self.modern_only {
            true => std::borrow::Cow::Owned(vec![ProtocolVersion::V_2026_07_28]),
            false => std::borrow::Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS),
        }
    }

    fn get_info(&self) -> ServerConfig {
        #[expect(deprecated, reason = "The logging capability backs the `_log` knob")]
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(&self.name, env!("CARGO_PKG_VERSION")))
            .with_instructions(match self.world {
                Some(_) => "A server of toolgate's built-in demo: made-up data kept in memory while it runs.",
                None => "A toolgate fixture: tools from a catalog file, answering deterministic echoes.",
            })
    }

    #[expect(deprecated, reason = "Logging backs the `_log` knob")]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.log_floor
            .store(request.level as u8, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let visible = self.visible_tools();
        let start = match request.and_then(|request| request.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|start| *start <= visible.len())
                .ok_or_else(|| {
                    ErrorData::invalid_params(format!("invalid cursor {cursor:?}"), None)
                })?,
        };
        let end = self
            .page_size
            .map_or(visible.len(), |size| (start + size).min(visible.len()));
        let mut result = ListToolsResult::with_all_items(
            visible[start..end]
                .iter()
                .map(|tool| tool.tool.clone())
                .collect(),
        );
        // The cursor is the next offset: opaque to clients, trivially stable for a fixture.
        result.next_cursor = (end < visible.len()).then(|| end.to_string());
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.as_ref();
        let Some(tool) = self.find_visible(name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {name:?}"),
                Some(serde_json::json!({"tool": name})),
            ));
        };
        let arguments = request.arguments.unwrap_or_default();
        let knobs = match self.knobs.knobs_for(name, &arguments) {
            Ok(knobs) => knobs,
            Err(error) => return Ok(error_result(format!("{error:#}"))),
        };
        if knobs.crash {
            tracing::warn!(tool = name, "_crash: exiting mid-call");
            std::process::exit(CRASH_EXIT_CODE);
        }
        if self.flood_notifications {
            crate::faults::flood_notifications(&context.peer).await;
        }
        if let Some(problem) = self.side_effects(&knobs, &context).await {
            return Ok(error_result(problem));
        }
        if let Some(message) = knobs.error {
            return Ok(error_result(message));
        }
        if let Some(world) = &self.world {
            return Ok(
                match world.call(&tool.server, name, &strip_knobs(&arguments)) {
                    Ok(answer) => {
                        let mut result =
                            CallToolResult::success(vec![ContentBlock::text(answer.to_string())]);
                        result.structured_content = Some(answer);
                        result.into()
                    }
                    Err(message) => error_result(message),
                },
            );
        }
        let echoed = echo(&tool.server, name, strip_knobs(&arguments));
        let structured = match tool.output_schema() {
            Some(schema) => Some(minimal_instance(&Value::Object(schema.clone()))),
            None if knobs.result_bytes.is_none() => Some(echoed.clone()),
            None => None,
        };
        let text = match knobs.result_bytes {
            Some(bytes) => sized_text(name, bytes as usize),
            None => echoed.to_string(),
        };
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = structured;
        Ok(result.into())
    }
}

/// Sends the `_log` notification. Logging is deprecated by SEP-2577, yet clients on the
/// protocol versions before 2026-07-28 still receive it, so the fixture keeps sending it.
/// Nothing is sent while `logging/setLevel` asked for a level above info.
#[expect(
    deprecated,
    reason = "SEP-2577 deprecates logging, sampling and roots; peers still send them"
)]
async fn send_log(peer: &rmcp::Peer<RoleServer>, data: Value, floor: &std::sync::atomic::AtomicU8) {
    use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
    if floor.load(std::sync::atomic::Ordering::Relaxed) > LoggingLevel::Info as u8 {
        return;
    }
    let param = LoggingMessageNotificationParam::new(LoggingLevel::Info, data)
        .with_logger("toolgate-fixture");
    if let Err(error) = peer.notify_logging_message(param).await {
        tracing::debug!(%error, "could not send the _log notification");
    }
}

fn error_result(message: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(message)]).into()
}

/// Sleeps `step`, or returns false at once when the call is cancelled (a cancelled call gets
/// no answer anyway: stop spending time on it). A zero step does not sleep at all: tokio
/// rounds a zero sleep up to its next 1 ms timer tick, which put a millisecond into every
/// call, and into every baseline measured against this fixture.
async fn pause(step: Duration, cancelled: &tokio_util::sync::CancellationToken) -> bool {
    if step.is_zero() {
        return !cancelled.is_cancelled();
    }
    tokio::select! {
        _ = tokio::time::sleep(step) => true,
        _ = cancelled.cancelled() => false,
    }
}

#[cfg(test)]
mod tests {
    use super::pause;
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    // The clock is paused: it moves only when every task waits on a timer, so these hold
    // on any machine, loaded or not.
    #[tokio::test(start_paused = true)]
    async fn no_delay_arms_no_timer() {
        // Off a millisecond boundary, as a real clock always is: a zero sleep would then
        // wait for the timer's next tick, and the paused clock would move to it.
        tokio::time::advance(Duration::from_micros(300)).await;
        let start = tokio::time::Instant::now();
        assert!(pause(Duration::ZERO, &CancellationToken::new()).await);
        assert_eq!(
            tokio::time::Instant::now(),
            start,
            "a zero delay waited for a timer tick"
        );
        assert!(pause(Duration::from_millis(50), &CancellationToken::new()).await);
        assert!(tokio::time::Instant::now() - start >= Duration::from_millis(50));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_call_stops_waiting() {
        let ct = CancellationToken::new();
        ct.cancel();
        assert!(!pause(Duration::from_secs(60), &ct).await);
        assert!(!pause(Duration::ZERO, &ct).await);
    }
}
