//! `toolgate auth login|logout UPSTREAM`: the operator logs the gateway in to an upstream
//! whose `[upstreams.NAME.oauth]` says `grant = "authorization_code"` (authorization code
//! with PKCE through a browser, the redirect to a loopback port of this command). The tokens
//! are kept sealed in the configured state store, where the gateway reads and refreshes
//! them. The embedded store is one process's file: stop the gateway first. With Redis the
//! replicas use the login at their next token.

use super::common::ConfigArgs;
use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use std::time::Duration;
use toolgate::oauth;
use toolgate::OAuthGrant;
use toolgate::Transport;

#[derive(Subcommand)]
pub(crate) enum AuthCommand {
    /// Log the gateway in to an upstream (authorization code with PKCE, in a browser).
    Login(LoginArgs),
    /// Forget the login kept for an upstream.
    Logout(LogoutArgs),
}

#[derive(Args)]
pub(crate) struct LoginArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The upstream, as named in `[upstreams.NAME]`.
    pub upstream: String,
    /// How long to wait for the browser to come back.
    #[arg(long, default_value_t = 300)]
    pub timeout_secs: u64,
}

#[derive(Args)]
pub(crate) struct LogoutArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    pub upstream: String,
}

pub(crate) async fn run(command: AuthCommand) -> Result<bool> {
    super::common::init_logging("warn");
    match command {
        AuthCommand::Login(a) => login(a).await,
        AuthCommand::Logout(a) => logout(a),
    }
}

async fn login(args: LoginArgs) -> Result<bool> {
    let config = args.config.load_quiet()?;
    let source = config.source_name();
    let up = (config.upstreams.get(&args.upstream)).ok_or_else(|| {
        let names: Vec<&str> = config.upstreams.keys().map(String::as_str).collect();
        anyhow!(
            "{source} has no upstream {:?}; its upstreams are: {}",
            args.upstream,
            names.join(", ")
        )
    })?;
    let (url, oauth) = match &up.transport {
        Transport::Http {
            url,
            oauth: Some(o),
            ..
        } if o.grant == OAuthGrant::AuthorizationCode => (url.clone(), o.clone()),
        _ => bail!(
            "upstreams.{0} does not log in: give it [upstreams.{0}.oauth] with grant = \"authorization_code\" (docs/auth.md)",
            args.upstream
        ),
    };
    let Some(store) = super::serve::open_store(&config, false)? else {
        bail!("{source} keeps its state in memory ([store] backend = \"memory\"): a login would not outlive this command; use the embedded or redis store");
    };
    let wait = Duration::from_secs(args.timeout_secs);
    let show = |link: &str| {
        println!(
            "Open this URL in a browser to log toolgate in to {}:\n\n  {link}\n",
            args.upstream
        );
        println!(
            "Waiting up to {} s for the browser to come back ...",
            wait.as_secs()
        );
    };
    let done = oauth::login(&args.upstream, &url, &oauth, store.as_ref(), show, wait)
        .await
        .map_err(|e| anyhow!("upstreams.{}: {e}", args.upstream))?;
    println!(
        "Logged in to {} at {} (client {}); the token is kept in the state store{}. `toolgate check` connects with it.",
        args.upstream,
        done.issuer,
        done.client_id,
        if done.refresh_token.is_some() {
            " and refreshed by the gateway"
        } else {
            " (no refresh token: log in again when it expires)"
        }
    );
    Ok(true)
}

fn logout(args: LogoutArgs) -> Result<bool> {
    let config = args.config.load_quiet()?;
    let Some(store) = super::serve::open_store(&config, false)? else {
        bail!("the state is in memory: no login is kept");
    };
    oauth::forget(store.as_ref(), &args.upstream).map_err(|e| anyhow!("{e}"))?;
    println!("The login for {} is forgotten.", args.upstream);
    Ok(true)
}
