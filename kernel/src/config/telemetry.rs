//! `[telemetry]`: traces sent to an OpenTelemetry collector, and who may read `/metrics`.

use serde::{Deserialize, Serialize};

/// Who may read `mnemo serve`'s Prometheus metrics at `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MetricsAccess {
    /// Anyone who can reach the server, without a key (what scrapers expect).
    #[default]
    Open,
    /// Only a request with an admin API key.
    Admin,
    /// Nobody: `/metrics` answers 404.
    Off,
}

/// `[telemetry]`: OpenTelemetry traces over OTLP/HTTP, off by default, and `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP base URL (`http://localhost:4318`); traces are sent as
    /// protobuf to `{otlp_endpoint}/v1/traces`. Empty: no traces are sent.
    pub otlp_endpoint: String,
    /// The `service.name` every span carries.
    pub service_name: String,
    /// Who may read `/metrics` on `mnemo serve`.
    pub metrics: MetricsAccess,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            otlp_endpoint: String::new(),
            service_name: "mnemo".to_owned(),
            metrics: MetricsAccess::Open,
        }
    }
}

impl TelemetryConfig {
    /// Every problem with the values, each naming its key.
    pub(super) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let endpoint = self.otlp_endpoint.trim();
        let is_url = endpoint.starts_with("http://") || endpoint.starts_with("https://");
        if !endpoint.is_empty() && !is_url {
            problems.push(format!(
                "key `telemetry.otlp_endpoint`: must be an http:// or https:// URL (or empty for \
                 no traces), not `{endpoint}`"
            ));
        }
        if self.service_name.trim().is_empty() {
            problems.push("key `telemetry.service_name`: must not be empty".to_owned());
        }
        problems
    }

    /// Where traces go: `{otlp_endpoint}/v1/traces`, or `None` when traces are off. An endpoint
    /// that already ends in `/v1/traces` is taken as it is.
    pub fn traces_url(&self) -> Option<String> {
        let endpoint = self.otlp_endpoint.trim().trim_end_matches('/');
        if endpoint.is_empty() {
            return None;
        }
        if endpoint.ends_with("/v1/traces") {
            return Some(endpoint.to_owned());
        }
        Some(format!("{endpoint}/v1/traces"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn off_by_default_and_open_metrics() {
        let config = Config::parse("", "c.toml").unwrap();
        assert_eq!(config.telemetry, TelemetryConfig::default());
        assert_eq!(config.telemetry.traces_url(), None);
        assert_eq!(config.telemetry.metrics, MetricsAccess::Open);
        let text = toml::to_string(&config.telemetry).unwrap();
        assert_eq!(
            toml::from_str::<TelemetryConfig>(&text).unwrap(),
            config.telemetry
        );
    }

    #[test]
    fn reads_the_endpoint_and_access() {
        let config = Config::parse(
            "[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318/\"\nmetrics = \"admin\"\n",
            "c.toml",
        )
        .unwrap();
        assert_eq!(
            config.telemetry.traces_url().as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(config.telemetry.metrics, MetricsAccess::Admin);
    }

    #[test]
    fn names_bad_keys_and_values() {
        let err = Config::parse(
            "[telemetry]\notlp_endpoint = \"localhost:4318\"\nservice_name = \" \"\n\
             metrics = \"public\"\nsampling = 1\n",
            "c.toml",
        )
        .unwrap_err();
        let text = err.to_string();
        for key in [
            "telemetry.otlp_endpoint",
            "telemetry.service_name",
            "telemetry.metrics",
            "telemetry.sampling",
        ] {
            assert!(text.contains(key), "{key}: {text}");
        }
    }
}
