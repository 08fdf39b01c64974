//! The `telemetry` section of `engine.json`: OpenTelemetry export of the engine's spans.

use super::Secret;
use super::keys::{http_or_https, section};

section! {
    /// The `telemetry` section of `engine.json`: OpenTelemetry export of the engine's
    /// spans (agent turns, model requests, tool calls, MCP calls, scheduled runs) over
    /// OTLP/HTTP. Off unless an endpoint is known, here or in the standard `OTEL_*`
    /// variables. Every key is optional.
    pub struct TelemetrySection {
        keys {
            /// Whether spans are exported when an endpoint is known; `false` turns export
            /// off even when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
            enabled: bool = true;
                key "enabled", env "KLAW_TELEMETRY_ENABLED", type "`true` or `false`";
            /// The OTLP/HTTP endpoint (a collector, Jaeger, ...): a base such as
            /// `http://127.0.0.1:4318`, to which `/v1/traces` is added, or a URL that
            /// already ends with `/v1/traces`. When unset,
            /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, then `OTEL_EXPORTER_OTLP_ENDPOINT`.
            endpoint: Option<String> = None;
                key "endpoint", env "KLAW_TELEMETRY_ENDPOINT", type "string (URL) or `null`",
                shown "`OTEL_EXPORTER_OTLP_*`, else none (off)", check otlp_url;
            /// The `service.name` of the exported spans; when unset, `OTEL_SERVICE_NAME`,
            /// else `klaw-engine`.
            service_name: Option<String> = None;
                key "serviceName", env "KLAW_TELEMETRY_SERVICE_NAME",
                type "string or `null`", shown "`OTEL_SERVICE_NAME`, else `klaw-engine`";
            /// Headers sent with each export (`{"authorization": "Bearer ..."}`); when
            /// empty, `OTEL_EXPORTER_OTLP_HEADERS` (`k=v,k2=v2`). Never printed.
            headers: std::collections::BTreeMap<String, Secret> = Default::default();
                key "headers", type "object: name → string";
            /// The share of traces kept, 0 to 1 (a trace continued from an MCP client's
            /// `traceparent` follows the client's decision).
            sample_ratio: f64 = 1.0;
                key "sampleRatio", env "KLAW_TELEMETRY_SAMPLE_RATIO", type "number, 0 to 1",
                check ratio;
        }
    }
}

fn otlp_url(url: &Option<String>, _: &TelemetrySection) -> Result<(), String> {
    url.as_deref().map_or(Ok(()), http_or_https)
}

fn ratio(r: &f64, _: &TelemetrySection) -> Result<(), String> {
    if (0.0..=1.0).contains(r) {
        Ok(())
    } else {
        Err(format!("{r} is not between 0 and 1"))
    }
}
