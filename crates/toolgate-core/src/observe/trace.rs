//! Traces: the spans of a call's path and the W3C trace context around them.
//!
//! Span names are fixed words (`SPAN_*`); attributes are bounded like the metrics'
//! labels: the MCP tool called, the upstream tool id, the surface, the outcome. No
//! arguments, no task text. The spans are plain `tracing` spans; a build with the `otel`
//! feature exports them (toolgate-cli installs the OTLP layer) and then:
//!
//! - a client's `traceparent` (the HTTP header, or `_meta.traceparent` of a 2026-07-28
//!   request) becomes the parent of the request's span ([`request_span`]);
//! - [`outgoing`] is the `traceparent` an upstream call carries (the current span's
//!   context), which the HTTP upstreams' client sends as a header.
//!
//! Without the feature the spans stay local (logs) and no `traceparent` is sent on.

/// The request's span: one per `tools/call`.
pub(crate) const SPAN_REQUEST: &str = "tools/call";

/// The W3C header (and `_meta` key) of a trace's context.
pub const TRACEPARENT: &str = "traceparent";

/// The `traceparent` an upstream call carries, in the call's rmcp request extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Traceparent(pub String);

/// Whether `v` is a W3C `traceparent` this gateway can continue: version `00`, a
/// 32-hex-digit trace id and 16-hex-digit parent id, neither all zeros, two hex flags.
pub fn parse(v: &str) -> Option<(&str, &str, u8)> {
    let parts: Vec<&str> = v.trim().split('-').collect();
    let [version, trace, parent, flags] = parts[..] else {
        return None;
    };
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let lower = |s: &str| !s.bytes().any(|b| b.is_ascii_uppercase());
    let zero = |s: &str| s.bytes().all(|b| b == b'0');
    let ok = version == "00"
        && hex(trace, 32)
        && hex(parent, 16)
        && hex(flags, 2)
        && lower(trace)
        && lower(parent)
        && !zero(trace)
        && !zero(parent);
    ok.then(|| (trace, parent, u8::from_str_radix(flags, 16).unwrap_or(0)))
}

/// The span of one `tools/call` (`tool`: the MCP tool's name as the client called it; a
/// name no tool could have, over 64 characters or outside `[A-Za-z0-9_./-]`, is recorded
/// as `other`), a child of the client's `traceparent` when it is valid.
pub fn request_span(tool: &str, surface: &str, traceparent: Option<&str>) -> tracing::Span {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let tool = if tool.len() <= 64 && tool.chars().all(plain) {
        tool
    } else {
        "other"
    };
    let span = tracing::info_span!(
        SPAN_REQUEST,
        "mcp.tool" = tool,
        "toolgate.surface" = surface,
        "toolgate.outcome" = tracing::field::Empty,
    );
    if let Some((trace, parent, flags)) = traceparent.and_then(parse) {
        set_parent(&span, trace, parent, flags);
    }
    span
}

#[cfg(feature = "otel")]
fn set_parent(span: &tracing::Span, trace: &str, parent: &str, flags: u8) {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let (Ok(trace), Ok(parent)) = (TraceId::from_hex(trace), SpanId::from_hex(parent)) else {
        return;
    };
    let remote = SpanContext::new(
        trace,
        parent,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    );
    let cx = opentelemetry::Context::new().with_remote_span_context(remote);
    // Fails only when no OpenTelemetry layer is installed: nothing is exported then.
    let _ = span.set_parent(cx);
}

#[cfg(not(feature = "otel"))]
fn set_parent(_: &tracing::Span, _: &str, _: &str, _: u8) {}

/// The `traceparent` of the current span, for an upstream call; `None` without the
/// `otel` feature or when no span is being exported.
pub fn outgoing() -> Option<Traceparent> {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let cx = tracing::Span::current().context();
        let sc = cx.span().span_context().clone();
        if sc.is_valid() {
            let flags = sc.trace_flags().to_u8();
            let (trace, span) = (sc.trace_id(), sc.span_id());
            return Some(Traceparent(format!("00-{trace}-{span}-{flags:02x}")));
        }
    }
    None
}

/// A meta-tool's span, inside the request's: `route`, `execute` or `execute_code` (the
/// names without `gateway.meta_prefix`; another name gets `meta`).
pub fn meta_span(name: &str) -> tracing::Span {
    macro_rules! span {
        ($name:literal) => {
            tracing::info_span!(
                $name,
                "toolgate.outcome" = tracing::field::Empty,
                "toolgate.route.decision" = tracing::field::Empty,
            )
        };
    }
    match name {
        "route" => span!("route"),
        "execute" => span!("execute"),
        "execute_code" => span!("execute_code"),
        _ => span!("meta"),
    }
}

/// How a meta-tool answered: `ok` or `error`, and for route its decision (one of
/// route's fixed words).
/// (`structured`: the answer's structured part).
pub fn record_meta(span: &tracing::Span, is_error: bool, structured: Option<&serde_json::Value>) {
    span.record("toolgate.outcome", if is_error { "error" } else { "ok" });
    let decision = structured.and_then(|s| s["decision"].as_str());
    if let Some(d) = decision {
        let word = match d {
            "select" => "select",
            "clarify" => "clarify",
            "exact" => "exact",
            _ => "other",
        };
        span.record("toolgate.route.decision", word);
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn only_a_valid_version_00_traceparent_is_continued() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            parse(good),
            Some(("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", 1))
        );
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
