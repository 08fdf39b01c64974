//! OpenTelemetry: the engine's `tracing` spans (agent turns, model requests, tool calls,
//! MCP calls, scheduled runs) exported over OTLP/HTTP when an endpoint is configured, and
//! a client's W3C trace context continued from an MCP request's `_meta`.
//!
//! Off by default, and then nothing is paid for it: the subscriber is the log's alone,
//! and a span no layer wants costs a check. On, a second layer (the `klaw` targets' spans
//! at `info`, events at `warn` and above) hands spans to the SDK's batch processor,
//! which sends them from its own thread on the workspace's reqwest (protobuf over HTTP,
//! no gRPC). Arguments, results and prompts are never in a span, only their sizes. See
//! `doc/telemetry.md`.

use crate::Config;

/// Why spans cannot be exported (the log is installed alone, and this is printed).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// An `OTEL_*` endpoint variable that is no http(s) URL.
    #[error("{var}={url:?} is not an http:// or https:// URL; spans are not exported")]
    NotHttp {
        /// The variable.
        var: String,
        /// Its value.
        url: String,
    },
    /// The HTTP client the exporter sends with could not be built.
    #[cfg(feature = "telemetry")]
    #[error("cannot build the OTLP client: {0}")]
    Client(#[source] reqwest::Error),
    /// The exporter for the endpoint could not be built.
    #[cfg(feature = "telemetry")]
    #[error("cannot export to {endpoint}: {source}")]
    Exporter {
        /// The traces URL.
        endpoint: String,
        /// What the SDK said.
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
    /// A `tracing` subscriber was already installed.
    #[error("{0}")]
    Subscriber(#[source] tracing_subscriber::util::TryInitError),
}

/// Where spans go: the `telemetry` section over the standard `OTEL_*` variables.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// The traces URL (`…/v1/traces`).
    pub endpoint: String,
    /// `service.name`.
    pub service_name: String,
    /// Headers from the configuration (`OTEL_EXPORTER_OTLP_HEADERS` is read by the
    /// exporter itself, and these win over it).
    pub headers: Vec<(String, crate::Secret)>,
    /// The share of new traces kept.
    pub sample_ratio: f64,
}

impl Export {
    /// What `config` and the process's environment ask for; `Ok(None)`: nothing is
    /// exported. An `OTEL_*` endpoint that is no http(s) URL is an error (the
    /// configuration's own key is checked when it is read).
    pub fn from_config(config: &Config) -> Result<Option<Self>, TelemetryError> {
        Self::resolve(config, |k| std::env::var(k).ok())
    }

    /// [`from_config`](Self::from_config) with `env` for the variables.
    pub fn resolve(
        config: &Config,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, TelemetryError> {
        let section = &config.raw.telemetry;
        let set = |k: &str| {
            env(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let off = |k: &str, v: &str| set(k).is_some_and(|x| x.eq_ignore_ascii_case(v));
        if !section.enabled
            || off("OTEL_SDK_DISABLED", "true")
            || off("OTEL_TRACES_EXPORTER", "none")
        {
            return Ok(None);
        }
        let endpoint = if let Some(url) = &section.endpoint {
            traces_url(url)
        } else if let Some(url) = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            check_env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &url)?;
            url
        } else if let Some(url) = set("OTEL_EXPORTER_OTLP_ENDPOINT") {
            check_env("OTEL_EXPORTER_OTLP_ENDPOINT", &url)?;
            traces_url(&url)
        } else {
            return Ok(None);
        };
        let service_name = section
            .service_name
            .clone()
            .filter(|s| !s.trim().is_empty())
            .or_else(|| set("OTEL_SERVICE_NAME"))
            .unwrap_or_else(|| "klaw-engine".to_owned());
        Ok(Some(Self {
            endpoint,
            service_name,
            headers: section
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            sample_ratio: section.sample_ratio,
        }))
    }
}

/// `base` with `/v1/traces`, unless it already ends with it (the spec's rule for the
/// signal-less variable; the configuration accepts either).
fn traces_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }
}

fn check_env(var: &str, url: &str) -> Result<(), TelemetryError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(TelemetryError::NotHttp {
            var: var.to_owned(),
            url: url.to_owned(),
        })
    }
}

#[cfg(feature = "telemetry")]
use otel::install;
#[cfg(feature = "telemetry")]
pub(crate) use otel::{continue_from, link, passed_on};
#[cfg(feature = "telemetry")]
pub use otel::{layer, provider, shutdown};

/// Installs the process's `tracing` subscriber as `klaw-engine` does: the log on
/// stderr, filtered by `logLevel`, and with telemetry configured (the `telemetry`
/// section, `OTEL_EXPORTER_OTLP_ENDPOINT`) the engine's spans exported beside it. A
/// problem with telemetry is printed and the log is installed alone; nothing happens
/// when a subscriber is already installed. Call [`shutdown`] before the process exits
/// so the last spans are sent.
pub fn init(config: &Config) {
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    match Export::from_config(config) {
        Ok(None) => {}
        #[cfg(feature = "telemetry")]
        Ok(Some(export)) => {
            use tracing_subscriber::Layer as _;
            let fmt = tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(ansi)
                .with_filter(log_filter(config));
            match install(&export, fmt) {
                Ok(()) => return,
                Err(e) => {
                    eprintln!("klaw-engine: telemetry: {e}");
                    return init_logging_alone(config, ansi);
                }
            }
        }
        #[cfg(not(feature = "telemetry"))]
        Ok(Some(_)) => {
            eprintln!(
                "klaw-engine: telemetry is configured but this build has no `telemetry` feature; spans are not exported"
            );
        }
        Err(e) => {
            eprintln!("klaw-engine: telemetry: {e}");
        }
    }
    init_logging_alone(config, ansi);
}

/// The log's filter: `logLevel` (checked when the configuration is read), else `warn`.
fn log_filter(config: &Config) -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_new(&config.raw.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"))
}

/// The log alone: one filtered `fmt` subscriber, as cheap as a disabled span can be.
fn init_logging_alone(config: &Config, ansi: bool) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(log_filter(config))
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}

/// Marks `span` as failed: `error.type` = `kind` and an error status (the span must
/// declare both fields, `Empty` until then).
pub(crate) fn failed(span: &tracing::Span, kind: &str) {
    span.record("error.type", kind);
    span.record("otel.status_code", "ERROR");
}

/// `n` as the integer OpenTelemetry stores (`tracing` hands unsigned values to the
/// exporter as text): a count or size as an `i64` attribute.
pub(crate) fn int<T: TryInto<i64>>(n: T) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

#[cfg(feature = "telemetry")]
mod otel {
    use std::sync::Mutex;
    use std::time::Duration;

    use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
    use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
    use serde_json::{Map, Value};
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    use super::{Export, TelemetryError};

    /// The provider spans go to, kept to be flushed at exit.
    static PROVIDER: Mutex<Option<SdkTracerProvider>> = Mutex::new(None);

    /// How long one export may take.
    const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

    /// Installs the log (`fmt`, filtered by `filter`) and the exporting layer as the
    /// process's subscriber; `Err` says why export could not start (the log is then
    /// installed alone by the caller).
    pub(crate) fn install(
        export: &Export,
        fmt: impl tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync,
    ) -> Result<(), TelemetryError> {
        let provider = provider(export)?;
        tracing_subscriber::registry()
            .with(fmt)
            .with(layer(provider.tracer("klaw-engine")))
            .try_init()
            .map_err(TelemetryError::Subscriber)?;
        *PROVIDER
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(provider);
        Ok(())
    }

    /// The layer that hands the engine's spans to `tracer`: the spans of the `klaw…`
    /// targets at `info` and above, with their names and attributes only — no log
    /// events (a failure's message can quote an argument; its kind is the span's
    /// `error.type`), no code locations, threads or busy/idle times. `install` puts it
    /// beside the log; a test or an embedding program can put it on its own subscriber.
    pub fn layer<S>(tracer: opentelemetry_sdk::trace::Tracer) -> impl Layer<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_level(false)
            .with_tracked_inactivity(false)
            .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                meta.is_span()
                    && meta.target().starts_with("klaw")
                    && *meta.level() <= tracing::Level::INFO
            }))
    }

    /// The SDK's provider for `export`: a batch processor (its own thread) sending
    /// protobuf over HTTP with the workspace's reqwest, sampled by `sampleRatio` (a
    /// parent's decision is followed), with `service.name` and `service.version`.
    pub fn provider(export: &Export) -> Result<SdkTracerProvider, TelemetryError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::blocking::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(TelemetryError::Client)?;
        let headers = export
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.expose().to_owned()))
            .collect();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(&export.endpoint)
            .with_headers(headers)
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|source| TelemetryError::Exporter {
                endpoint: export.endpoint.clone(),
                source,
            })?;
        let resource = Resource::builder()
            .with_service_name(export.service_name.clone())
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .build();
        Ok(SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                export.sample_ratio,
            ))))
            .with_resource(resource)
            .build())
    }

    /// Sends what is still buffered and stops the exporter (at the end of `main`).
    pub fn shutdown() {
        let provider = PROVIDER
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(p) = provider
            && let Err(e) = p.shutdown()
        {
            eprintln!("klaw-engine: the last spans were not exported: {e}");
        }
    }

    /// Makes `span` a child of the W3C trace context in an MCP request's `_meta`
    /// (`traceparent`, `tracestate`), when there is a valid one.
    pub(crate) fn continue_from(span: &tracing::Span, meta: &Map<String, Value>) {
        use opentelemetry::propagation::TextMapPropagator;
        if !meta.contains_key("traceparent") {
            return;
        }
        let cx = opentelemetry_sdk::propagation::TraceContextPropagator::new()
            .extract(&MetaExtractor(meta));
        if cx.span().span_context().is_valid() {
            let _ = span.set_parent(cx);
        }
    }

    /// The current span's W3C trace context to pass on to a server the engine asks (a
    /// model's `traceparent` header, an imported MCP server's `_meta`): `traceparent`,
    /// and `tracestate` when there is one. Empty outside an exported span.
    pub(crate) fn passed_on() -> Vec<(&'static str, String)> {
        use opentelemetry::propagation::TextMapPropagator;
        let cx = tracing::Span::current().context();
        if !cx.span().span_context().is_valid() {
            return Vec::new();
        }
        let mut carrier = std::collections::HashMap::new();
        opentelemetry_sdk::propagation::TraceContextPropagator::new()
            .inject_context(&cx, &mut carrier);
        ["traceparent", "tracestate"]
            .into_iter()
            .filter_map(|k| Some((k, carrier.remove(k).filter(|v| !v.is_empty())?)))
            .collect()
    }

    /// Links `span` to the span a W3C `traceparent` names (what started it, in another
    /// trace); a malformed one is ignored.
    pub(crate) fn link(span: &tracing::Span, traceparent: &str) {
        use opentelemetry::propagation::TextMapPropagator;
        let mut carrier = std::collections::HashMap::new();
        carrier.insert("traceparent".to_owned(), traceparent.to_owned());
        let cx = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
        let origin = cx.span().span_context().clone();
        if origin.is_valid() {
            span.add_link(origin);
        }
    }

    /// `_meta` read as a carrier of text-map keys.
    struct MetaExtractor<'a>(&'a Map<String, Value>);

    impl opentelemetry::propagation::Extractor for MetaExtractor<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            self.0.get(key).and_then(Value::as_str)
        }

        fn keys(&self) -> Vec<&str> {
            self.0.keys().map(String::as_str).collect()
        }
    }
}

/// Without the `telemetry` feature: nothing to continue.
#[cfg(not(feature = "telemetry"))]
pub(crate) fn continue_from(
    _span: &tracing::Span,
    _meta: &serde_json::Map<String, serde_json::Value>,
) {
}

/// Without the `telemetry` feature: nothing to link.
#[cfg(not(feature = "telemetry"))]
pub(crate) fn link(_span: &tracing::Span, _traceparent: &str) {}

/// Without the `telemetry` feature: no trace context to pass on.
#[cfg(not(feature = "telemetry"))]
pub(crate) fn passed_on() -> Vec<(&'static str, String)> {
    Vec::new()
}

/// Without the `telemetry` feature: nothing to flush.
#[cfg(not(feature = "telemetry"))]
pub fn shutdown() {}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(json: &str) -> Result<Config, crate::ConfigError> {
        let path = std::path::Path::new("/h/engine.json");
        let raw = crate::config::parse(path, json)?;
        let home = |k: &str| (k == "HOME").then(|| "/h".to_owned());
        Config::resolve(
            raw,
            crate::config::ConfigSource::Defaults(path.into()),
            &home,
        )
    }

    fn config(json: &str) -> Config {
        load(json).unwrap()
    }

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn nothing_is_exported_without_an_endpoint() {
        assert_eq!(Export::resolve(&config("{}"), env(&[])).unwrap(), None);
    }

    #[test]
    fn the_standard_variables_give_the_endpoint_and_the_name() {
        let c = config("{}");
        let e = Export::resolve(
            &c,
            env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/"),
                ("OTEL_SERVICE_NAME", "my-agent"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(e.endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(e.service_name, "my-agent");
        // The signal's own variable is used as it is, and wins.
        let e = Export::resolve(
            &c,
            env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:9999/traces"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(e.endpoint, "http://b:9999/traces");
        assert_eq!(e.service_name, "klaw-engine");
    }

    #[test]
    fn the_configuration_wins_and_can_turn_export_off() {
        let vars = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318")];
        let e = Export::resolve(
            &config(r#"{"telemetry": {"endpoint": "https://otel.example/v1/traces", "serviceName": "x", "headers": {"authorization": "Bearer t"}, "sampleRatio": 0.5}}"#),
            env(&vars),
        )
        .unwrap()
        .unwrap();
        assert_eq!(e.endpoint, "https://otel.example/v1/traces");
        assert_eq!(e.service_name, "x");
        assert_eq!(e.headers[0].0, "authorization");
        assert_eq!(e.headers[0].1.expose(), "Bearer t");
        assert!((e.sample_ratio - 0.5).abs() < f64::EPSILON);
        let off = config(r#"{"telemetry": {"enabled": false}}"#);
        assert_eq!(Export::resolve(&off, env(&vars)).unwrap(), None);
        for disabled in [
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            let vars = [vars[0], disabled];
            assert_eq!(Export::resolve(&config("{}"), env(&vars)).unwrap(), None);
        }
    }

    #[test]
    fn a_bad_variable_or_key_is_an_error_naming_it() {
        let err = Export::resolve(
            &config("{}"),
            env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318")]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{err}");
        for (bad, named) in [
            (
                r#"{"telemetry": {"endpoint": "grpc://x"}}"#,
                "telemetry.endpoint",
            ),
            (
                r#"{"telemetry": {"sampleRatio": 2}}"#,
                "telemetry.sampleRatio",
            ),
            (r#"{"telemetry": {"endpiont": "http://x"}}"#, "`endpiont`"),
        ] {
            let err = load(bad).unwrap_err().to_string();
            assert!(err.contains(named), "{bad}: {err}");
        }
    }
}
