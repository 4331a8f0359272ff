//! `[gateway.limits]`: what one client, or many, may hold of the gateway over HTTP
//! (connections, sessions, time to send a request) and how long a shutdown may take.
//!
//! ```toml
//! [gateway.limits]
//! header_timeout_secs = 10       # a request's line and headers must arrive within this
//! body_timeout_secs = 30         # its whole body within this, once the headers are in
//! idle_timeout_secs = 60         # a keep-alive connection with no request is closed after this
//! max_connections = 1024         # open HTTP connections; more are answered 503 and closed
//! max_connections_per_client = 256 # open HTTP connections from one client address (429)
//! unauthenticated_idle_secs = 10 # a connection with no authenticated request is closed once
//!                                # idle this long after it opened
//! max_sessions = 1000            # open MCP sessions (Mcp-Session-Id), all principals together
//! max_sessions_per_principal = 100
//! session_idle_secs = 300        # a session unused this long is closed (sooner under pressure)
//! shutdown_grace_secs = 10       # SIGTERM: calls in flight may finish within this
//! ```

use super::{invalid, Result};
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// `max_connections_per_client` unless configured (or `max_connections`, if lower).
const DEFAULT_PER_CLIENT: usize = 256;

/// The limits, validated.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Time from a connection waiting for a request to the end of that request's headers
    /// once its first byte arrived (a slow-headers client holds a socket no longer).
    pub header_timeout: Duration,
    /// Time for a request body to arrive in full after its headers.
    pub body_timeout: Duration,
    /// A keep-alive connection that sends nothing is closed after this (idle sockets
    /// would otherwise exhaust file descriptors).
    pub idle_timeout: Duration,
    /// Open HTTP connections at once; a connection over it gets a 503 that says so.
    pub max_connections: usize,
    /// Open HTTP connections from one client address (IP) at once; one over it gets a 429
    /// that says so. Without it, one client's idle sockets could hold every slot.
    pub max_connections_per_client: usize,
    /// A connection none of whose requests was authenticated (a key accepted, or no keys
    /// configured) is closed once it is idle and this long has passed since it opened,
    /// sooner than `idle_timeout` closes an authenticated one: a keyless client cannot
    /// hold a slot by sending an unauthenticated request now and then.
    pub unauthenticated_idle: Duration,
    /// Open MCP sessions at once, all principals together.
    pub max_sessions: usize,
    /// Open MCP sessions of one principal (an API key, else the local identity).
    pub max_sessions_per_principal: usize,
    /// A session unused this long is closed; past three quarters of `max_sessions`, the
    /// least recently used idle ones are closed sooner, down to a tenth of this.
    pub session_idle: Duration,
    /// On SIGTERM, how long calls in flight may run before they are answered with an error
    /// saying the gateway is shutting down.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_connections_per_client: DEFAULT_PER_CLIENT,
            unauthenticated_idle: Duration::from_secs(10),
            max_sessions: 1000,
            max_sessions_per_principal: 100,
            session_idle: Duration::from_secs(300),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// `[gateway.limits]` as written; every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimits {
    pub header_timeout_secs: Option<f64>,
    pub body_timeout_secs: Option<f64>,
    pub idle_timeout_secs: Option<f64>,
    pub max_connections: Option<u64>,
    pub max_connections_per_client: Option<u64>,
    pub unauthenticated_idle_secs: Option<f64>,
    pub max_sessions: Option<u64>,
    pub max_sessions_per_principal: Option<u64>,
    pub session_idle_secs: Option<f64>,
    pub shutdown_grace_secs: Option<f64>,
}

impl RawLimits {
    pub(crate) fn validate(self, file: &Path) -> Result<Limits> {
        let d = Limits::default();
        let secs = |key: &str, v: Option<f64>, default: Duration, max: f64| -> Result<Duration> {
            match v {
                None => Ok(default),
                Some(s) if s.is_finite() && s > 0.0 && s <= max => Ok(Duration::from_secs_f64(s)),
                Some(s) => invalid!(
                    "{}: gateway.limits.{key} = {s}: use a number of seconds above 0 and at most {max} (default {})",
                    file.display(),
                    default.as_secs_f64()
                ),
            }
        };
        let count = |key: &str, v: Option<u64>, default: usize, max: u64| -> Result<usize> {
            match v {
                None => Ok(default),
                Some(n) if (1..=max).contains(&n) => Ok(n as usize),
                Some(n) => invalid!(
                    "{}: gateway.limits.{key} = {n}: use a number from 1 to {max} (default {default})",
                    file.display()
                ),
            }
        };
        let day = 86_400.0;
        let mut limits = Limits {
            header_timeout: secs(
                "header_timeout_secs",
                self.header_timeout_secs,
                d.header_timeout,
                3600.0,
            )?,
            body_timeout: secs(
                "body_timeout_secs",
                self.body_timeout_secs,
                d.body_timeout,
                3600.0,
            )?,
            idle_timeout: secs(
                "idle_timeout_secs",
                self.idle_timeout_secs,
                d.idle_timeout,
                day,
            )?,
            max_connections: count(
                "max_connections",
                self.max_connections,
                d.max_connections,
                1 << 20,
            )?,
            max_connections_per_client: count(
                "max_connections_per_client",
                self.max_connections_per_client,
                d.max_connections_per_client,
                1 << 20,
            )?,
            unauthenticated_idle: secs(
                "unauthenticated_idle_secs",
                self.unauthenticated_idle_secs,
                d.unauthenticated_idle,
                day,
            )?,
            max_sessions: count("max_sessions", self.max_sessions, d.max_sessions, 1 << 24)?,
            max_sessions_per_principal: count(
                "max_sessions_per_principal",
                self.max_sessions_per_principal,
                d.max_sessions_per_principal,
                1 << 24,
            )?,
            session_idle: secs(
                "session_idle_secs",
                self.session_idle_secs,
                d.session_idle,
                day,
            )?,
            shutdown_grace: secs(
                "shutdown_grace_secs",
                self.shutdown_grace_secs,
                d.shutdown_grace,
                3600.0,
            )?,
        };
        match self.max_connections_per_client {
            // The default never asks for more than the whole cap.
            None => {
                limits.max_connections_per_client =
                    limits.max_connections_per_client.min(limits.max_connections)
            }
            Some(_) if limits.max_connections_per_client > limits.max_connections => invalid!(
                "{}: gateway.limits.max_connections_per_client = {} is above max_connections = {}: lower it or raise max_connections",
                file.display(),
                limits.max_connections_per_client,
                limits.max_connections
            ),
            Some(_) => {}
        }
        if limits.max_sessions_per_principal > limits.max_sessions {
            invalid!(
                "{}: gateway.limits.max_sessions_per_principal = {} is above max_sessions = {}: lower it or raise max_sessions",
                file.display(),
                limits.max_sessions_per_principal,
                limits.max_sessions
            );
        }
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Limits> {
        let raw: RawLimits = toml::from_str(text)
            .map_err(|e| crate::config::ConfigError::from_reader(e.to_string()))?;
        raw.validate(Path::new("t.toml"))
    }

    #[test]
    fn every_key_is_read_and_defaults_fill_the_rest() {
        let l = parse("header_timeout_secs = 2.5\nmax_connections = 7\n").unwrap();
        assert_eq!(l.header_timeout, Duration::from_millis(2500));
        assert_eq!(l.max_connections, 7);
        assert_eq!(l.body_timeout, Limits::default().body_timeout);
    }

    #[test]
    fn out_of_range_values_name_the_key_and_the_range() {
        let e = parse("idle_timeout_secs = 0\n").unwrap_err().to_string();
        assert!(
            e.contains("gateway.limits.idle_timeout_secs = 0") && e.contains("above 0"),
            "{e}"
        );
        let e = parse("max_sessions = 0\n").unwrap_err().to_string();
        assert!(e.contains("gateway.limits.max_sessions = 0"), "{e}");
        let e = parse("max_sessions = 5\nmax_sessions_per_principal = 6\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("above max_sessions = 5"), "{e}");
        let e = parse("max_connections = 5\nmax_connections_per_client = 6\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("above max_connections = 5"), "{e}");
        let l = parse("max_connections = 5\nunauthenticated_idle_secs = 2\n").unwrap();
        assert_eq!(
            l.max_connections_per_client, 5,
            "the default fits under the cap"
        );
        assert_eq!(l.unauthenticated_idle, Duration::from_secs(2));
        assert!(
            parse("max_conections = 5\n").is_err(),
            "unknown keys are errors"
        );
    }
}
