//! `[telemetry]`: where the gateway's spans are exported (OTLP over HTTP, protobuf).
//!
//! ```toml
//! [telemetry]
//! endpoint = "http://127.0.0.1:4318"  # the collector's OTLP/HTTP base URL; spans go to
//!                                     #   <endpoint>/v1/traces. Absent: the variable
//!                                     #   OTEL_EXPORTER_OTLP_ENDPOINT; neither: no export
//! service_name = "toolgate"           # `service.name` of the spans; absent:
//!                                     #   OTEL_SERVICE_NAME, else "toolgate"
//! ```
//!
//! Export needs a build with `--features otel`; without it a configured `endpoint` is an
//! error (and the variable alone a warning, as it may be meant for other processes).

use super::{invalid, Result};
use serde::Deserialize;

/// The variable naming the collector when `[telemetry] endpoint` is absent.
pub const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The variable naming the service when `[telemetry] service_name` is absent.
pub(crate) const SERVICE_VAR: &str = "OTEL_SERVICE_NAME";

/// `[telemetry]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTelemetry {
    pub(crate) endpoint: Option<String>,
    pub(crate) service_name: Option<String>,
}

/// `[telemetry]`, validated (the variables are read when the exporter starts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP base URL from the file; `None`: [`ENDPOINT_VAR`] decides.
    pub endpoint: Option<String>,
    /// `service.name`; `None`: `OTEL_SERVICE_NAME`, else `toolgate`.
    pub service_name: Option<String>,
}

impl RawTelemetry {
    pub(super) fn validate(self) -> Result<TelemetryConfig> {
        if let Some(e) = &self.endpoint {
            if !(e.starts_with("http://") || e.starts_with("https://")) {
                invalid!("telemetry.endpoint {e:?} is not an OTLP/HTTP URL: write e.g. \"http://127.0.0.1:4318\"");
            }
            if !cfg!(feature = "otel") {
                invalid!("telemetry.endpoint is set but this toolgate was built without span export: build it with `--features otel` (cargo install --path crates/toolgate-cli --features otel), or remove [telemetry]");
            }
        }
        if self.service_name.as_deref().is_some_and(str::is_empty) {
            invalid!("telemetry.service_name is empty: name the service (e.g. \"toolgate\") or remove the key");
        }
        Ok(TelemetryConfig {
            endpoint: self.endpoint,
            service_name: self.service_name,
        })
    }
}

impl TelemetryConfig {
    /// Where spans go: the file's endpoint, else [`ENDPOINT_VAR`] (empty counts as unset).
    pub fn endpoint(&self) -> Option<String> {
        (self.endpoint.clone())
            .or_else(|| std::env::var(ENDPOINT_VAR).ok())
            .filter(|e| !e.is_empty())
    }

    /// The spans' `service.name`.
    pub fn service_name(&self) -> String {
        (self.service_name.clone())
            .or_else(|| std::env::var(SERVICE_VAR).ok().filter(|s| !s.is_empty()))
            .unwrap_or_else(|| "toolgate".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_endpoint_says_what_to_write() {
        let raw = RawTelemetry {
            endpoint: Some("127.0.0.1:4318".into()),
            service_name: None,
        };
        let e = raw.validate().unwrap_err().to_string();
        assert!(e.contains("http://127.0.0.1:4318"), "{e}");
    }

    #[test]
    fn an_endpoint_needs_the_feature() {
        let raw = RawTelemetry {
            endpoint: Some("http://127.0.0.1:4318".into()),
            service_name: None,
        };
        let r = raw.validate();
        if cfg!(feature = "otel") {
            assert_eq!(
                r.unwrap().endpoint.as_deref(),
                Some("http://127.0.0.1:4318")
            );
        } else {
            assert!(r.unwrap_err().to_string().contains("--features otel"));
        }
    }
}
