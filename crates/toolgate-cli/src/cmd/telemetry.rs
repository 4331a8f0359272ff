//! `serve`'s logging and, built with `--features otel`, its span export: OTLP over HTTP
//! (protobuf) to `[telemetry] endpoint` or `OTEL_EXPORTER_OTLP_ENDPOINT`, in batches,
//! flushed when the gateway stops ([`Telemetry::shutdown`]). Only toolgate's own spans
//! (target `toolgate`, info and above) are exported, whatever `RUST_LOG` says of logs.

use anyhow::Result;
use toolgate::telemetry::TelemetryConfig;

/// What must be flushed at shutdown.
pub(crate) struct Telemetry {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Telemetry {
    /// Sends the spans still batched (bounded by the exporter's own timeout).
    pub(crate) fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(p) = self.provider {
            if let Err(e) = p.shutdown() {
                tracing::warn!("spans not all exported at shutdown: {e}");
            }
        }
    }
}

/// Installs the logs (as `init_logging`) and, when an endpoint is configured, the export.
pub(crate) fn init(default: &str, config: &TelemetryConfig) -> Result<Telemetry> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let registry = tracing_subscriber::registry().with(super::common::log_layer(default));
    let Some(endpoint) = config.endpoint() else {
        let _ = registry.try_init();
        #[cfg(feature = "otel")]
        return Ok(Telemetry { provider: None });
        #[cfg(not(feature = "otel"))]
        return Ok(Telemetry {});
    };
    #[cfg(feature = "otel")]
    {
        let (layer, provider) = otel::layer(&endpoint, &config.service_name())?;
        let _ = registry.with(layer).try_init();
        tracing::info!("exporting spans over OTLP/HTTP to {endpoint}");
        Ok(Telemetry {
            provider: Some(provider),
        })
    }
    #[cfg(not(feature = "otel"))]
    {
        // The file's endpoint is refused when the configuration is validated; the variable
        // may be meant for other programs.
        let _ = registry.try_init();
        tracing::warn!("{}={endpoint} is set but this toolgate was built without span export: build it with `--features otel` to export spans", toolgate::telemetry::ENDPOINT_VAR);
        Ok(Telemetry {})
    }
}

#[cfg(feature = "otel")]
mod otel {
    use anyhow::{Context, Result};
    use opentelemetry::trace::TracerProvider;
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use opentelemetry_sdk::Resource;
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::Layer;

    /// The OpenTelemetry layer exporting to `<endpoint>/v1/traces`, and its provider.
    pub(super) fn layer<S>(
        endpoint: &str,
        service: &str,
    ) -> Result<(impl Layer<S>, SdkTracerProvider)>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url.clone())
            .build()
            .with_context(|| format!("cannot set up the OTLP exporter for {url}"))?;
        let resource = Resource::builder()
            .with_service_name(service.to_string())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("toolgate");
        let only_ours = Targets::new().with_target("toolgate", LevelFilter::INFO);
        let layer = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(only_ours);
        Ok((layer, provider))
    }
}
