//! Tests of `raw.rs`: the TOML file as written, parsed and validated.

use super::*;
use std::path::Path;
use std::time::Duration;
use toolgate_route::shape::{ShapeProfile, SlimOptions};

fn parse(s: &str) -> Result<Config> {
    Config::from_toml_str(s, Path::new("toolgate.toml"))
}

#[test]
fn route_examples_load_relative_to_the_config_and_lower_the_default_threshold() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ex.jsonl"),
        "{\"query\": \"find coupons\", \"expected\": [\"shop/get_discounts\"]}\n",
    )
    .unwrap();
    let file = dir.path().join("toolgate.toml");
    let g = Config::from_toml_str("[guided]\nroute_examples = \"ex.jsonl\"\n", &file)
        .unwrap()
        .guided;
    assert_eq!(
        g.route_examples.of("shop", "get_discounts"),
        ["find coupons"]
    );
    assert_eq!(g.route_threshold, toolgate_route::EXAMPLES_THRESHOLD);
    let text = "[guided]\nroute_examples = \"ex.jsonl\"\nroute_threshold = 0.97\n";
    let g = Config::from_toml_str(text, &file).unwrap().guided;
    assert_eq!(g.route_threshold, 0.97);
    let g = parse("").unwrap().guided;
    assert!(g.route_examples.is_empty());
    assert_eq!(g.route_threshold, toolgate_route::DEFAULT_THRESHOLD);
    let err =
        Config::from_toml_str("[guided]\nroute_examples = \"missing.jsonl\"\n", &file).unwrap_err();
    assert!(
        format!("{err:#}").contains("guided.route_examples"),
        "{err:#}"
    );
}

#[test]
#[expect(
    clippy::disallowed_methods,
    reason = "`${VAR}` expansion needs a variable set; its name is this test's own, and the \
              race is with a test binary's threads, not a gateway's"
)]
fn full_example_parses() {
    std::env::set_var("TG_TEST_TOKEN", "abc");
    let c = parse(
        r#"
        [gateway]
        listen = "127.0.0.1:9999"
        mode = "direct"
        [upstreams.gh]
        command = "gh-mcp"
        args = ["stdio"]
        env = { TOKEN = "${TG_TEST_TOKEN}" }
        [upstreams.docs]
        url = "http://127.0.0.1:1/mcp"
        headers = { Authorization = "Bearer ${TG_TEST_TOKEN}" }
        call_timeout_secs = 5
        enabled = false
        "#,
    )
    .unwrap();
    assert_eq!(c.gateway.mode, Mode::Direct);
    assert_eq!(c.gateway.listen.port(), 9999);
    let gh = &c.upstreams["gh"];
    match &gh.transport {
        Transport::Stdio { env, .. } => assert_eq!(env["TOKEN"], "abc"),
        t => panic!("{t:?}"),
    }
    assert!(!c.upstreams["docs"].enabled);
    assert_eq!(c.upstreams["docs"].call_timeout, Duration::from_secs(5));
    assert_eq!(c.enabled_upstreams().count(), 1);
}

#[test]
fn unknown_keys_and_wrong_types_name_the_key() {
    let e = parse("[upstreams.a]\ncommand = \"x\"\ncomand = \"y\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("toolgate.toml") && e.contains("comand"), "{e}");
    let e = parse("[gateway]\nmode = 3\n").unwrap_err().to_string();
    assert!(e.contains("mode"), "{e}");
    let e = parse("[gateway]\nmode = \"fast\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("fast") && e.contains("guided"), "{e}");
}

#[test]
fn bad_upstreams_say_what_to_fix() {
    let e = parse("[upstreams.a]\n").unwrap_err().to_string();
    assert!(
        e.contains("upstreams.a") && e.contains("command") && e.contains("url"),
        "{e}"
    );
    let e = parse("[upstreams.a]\ncommand='x'\nurl='http://h'\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("both"), "{e}");
    let e = parse("[upstreams.a]\nurl='ftp://h'\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("http://"), "{e}");
    let e = parse("[upstreams.\"a b\"]\ncommand='x'\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("not allowed"), "{e}");
    let e = parse("[upstreams.a]\ncommand='x'\nenv={A='${TG_SURELY_UNSET_VAR}'}\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("upstreams.a.env.A") && e.contains("TG_SURELY_UNSET_VAR"),
        "{e}"
    );
    let e = parse("[upstreams.a]\ncommand='x'\n[upstreams.a]\ncommand='y'\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("duplicate"), "{e}");
    let e = parse("[upstreams.a]\ncommand='x'\ncall_timeout_secs=0\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("call_timeout_secs"), "{e}");
    let e = parse("[upstreams.a]\ncommand='x'\nmax_message_bytes=10\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("max_message_bytes = 10") && e.contains("1024"),
        "{e}"
    );
    let c = parse("[upstreams.a]\ncommand='x'\nmax_message_bytes=2048\n").unwrap();
    assert_eq!(c.upstreams["a"].max_message_bytes, 2048);
}

#[test]
fn an_upstreams_protocol_is_one_of_three_words() {
    use crate::config::UpstreamProtocol;
    let c = parse("[upstreams.a]\ncommand='x'\n").unwrap();
    assert_eq!(c.upstreams["a"].protocol, UpstreamProtocol::Auto);
    let c = parse("[upstreams.a]\ncommand='x'\nprotocol='2026-07-28'\n").unwrap();
    assert_eq!(c.upstreams["a"].protocol, UpstreamProtocol::Modern);
    let c = parse("[upstreams.a]\ncommand='x'\nprotocol='2025-11-25'\n").unwrap();
    assert_eq!(c.upstreams["a"].protocol, UpstreamProtocol::Legacy);
    let e = parse("[upstreams.a]\ncommand='x'\nprotocol='modern'\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("upstreams.a.protocol = \"modern\"") && e.contains("2026-07-28"),
        "{e}"
    );
}

#[test]
fn an_upstreams_transport_names_the_http_style_and_fits_its_kind() {
    use crate::config::{HttpStyle, Transport};
    let style = |toml: &str| match parse(toml).unwrap().upstreams["a"].transport.clone() {
        Transport::Http { style, .. } => style,
        other => panic!("not HTTP: {other:?}"),
    };
    assert_eq!(
        style("[upstreams.a]\nurl='http://h/mcp'\n"),
        HttpStyle::Auto
    );
    assert_eq!(
        style("[upstreams.a]\nurl='http://h/mcp'\ntransport='streamable-http'\n"),
        HttpStyle::Streamable
    );
    assert_eq!(
        style("[upstreams.a]\nurl='http://h/sse'\ntransport='sse'\n"),
        HttpStyle::Sse
    );
    assert!(parse("[upstreams.a]\ncommand='x'\ntransport='stdio'\n").is_ok());
    let e = parse("[upstreams.a]\ncommand='x'\ntransport='sse'\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("upstreams.a.transport = \"sse\" with `command`") && e.contains("`url`"),
        "{e}"
    );
    let e = parse("[upstreams.a]\nurl='http://h/ws'\ntransport='websocket'\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("upstreams.a.transport = \"websocket\"") && e.contains("\"sse\""),
        "{e}"
    );
}

#[test]
fn direct_profile_and_options() {
    let c = parse("").unwrap();
    assert_eq!(c.direct.profile, ShapeProfile::Raw);
    assert_eq!(c.direct.slim, SlimOptions::default());
    let c = parse(
        "[direct]\nprofile = \"local\"\n[direct.slim]\ndescription_max = 300\n\
         [direct.slim.tools.\"gh/create_issue\"]\ndescription = \"Open an issue.\"\n\
         [direct.local]\nmax_bound = 16\n",
    )
    .unwrap();
    assert_eq!(c.direct.profile, ShapeProfile::Local);
    assert_eq!(c.direct.slim.description_max, 300);
    assert_eq!(c.direct.slim.property_description_max, 200, "defaults kept");
    assert_eq!(
        c.direct.slim.tools["gh/create_issue"]
            .description
            .as_deref(),
        Some("Open an issue.")
    );
    assert_eq!(c.direct.local.max_bound, 16);
    let e = parse("[direct]\nprofile = \"tiny\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("tiny") && e.contains("slim"), "{e}");
    let e = parse("[direct.slim]\ndescription_maxx = 3\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("description_maxx") && e.contains("toolgate.toml"),
        "{e}"
    );
    let e = parse("[direct]\nslimm = {}\n").unwrap_err().to_string();
    assert!(e.contains("slimm"), "{e}");
    let e = parse("[direct.slim]\ndescription_max = 5\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("direct.slim.description_max"), "{e}");
    let e = parse("[direct.slim.tools.x]\nname = \"a b\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("direct.slim.tools"), "{e}");
}

#[test]
fn the_session_budget_and_admin_access_keys_are_read_and_checked() {
    let c =
        parse("[guided]\nsession_budget_tokens = 50000\n[gateway]\nadmin_allow_remote = true\n")
            .unwrap();
    assert_eq!(c.guided.session_budget_tokens, Some(50000));
    assert!(c.gateway.admin_allow_remote);
    let c = parse("").unwrap();
    assert_eq!(c.guided.session_budget_tokens, None);
    assert!(!c.gateway.admin_allow_remote);
    let err = parse("[guided]\nsession_budget_tokens = 10\n").unwrap_err();
    assert!(format!("{err:#}").contains("at least 1000"), "{err:#}");
    let err = parse("[gateway]\nadmin_remote = true\n").unwrap_err();
    assert!(format!("{err:#}").contains("admin_remote"), "{err:#}");
}

#[test]
fn direct_max_result_tokens_defaults_to_25000_and_refuses_tiny_budgets() {
    assert_eq!(parse("").unwrap().direct.max_result_tokens, 25_000);
    let d = parse("[direct]\nmax_result_tokens = 4000\n")
        .unwrap()
        .direct;
    assert_eq!(d.max_result_tokens, 4000);
    let err = parse("[direct]\nmax_result_tokens = 10\n").unwrap_err();
    let text = format!("{err:#}");
    assert!(
        text.contains("direct.max_result_tokens = 10") && text.contains("at least 200"),
        "{text}"
    );
}

#[test]
fn worker_threads_is_read_and_zero_is_refused() {
    assert_eq!(parse("").unwrap().gateway.worker_threads, None);
    let c = parse("[gateway]\nworker_threads = 3\n").unwrap();
    assert_eq!(c.gateway.worker_threads, Some(3));
    let err = parse("[gateway]\nworker_threads = 0\n").unwrap_err();
    let text = format!("{err:#}");
    assert!(text.contains("gateway.worker_threads = 0"), "{text}");
    assert!(text.contains("write 1 or more"), "{text}");
}

#[test]
fn a_token_exchange_upstream_takes_its_client_audience_and_refuses_what_does_not_fit() {
    let base = "[upstreams.t]\nurl = \"https://t.example.com/mcp\"\n[upstreams.t.oauth]\n";
    let ok = format!("{base}grant = \"token_exchange\"\nissuer = \"https://idp\"\nclient_id = \"gw\"\nclient_secret = \"s\"\nscopes = [\"t:read\"]\naudience = \"tickets\"\n");
    let c = parse(&ok).unwrap();
    let Transport::Http { oauth: Some(o), .. } = &c.upstreams["t"].transport else {
        panic!("an HTTP upstream with oauth");
    };
    assert_eq!(o.grant, upstream::OAuthGrant::TokenExchange);
    assert_eq!(o.audience.as_deref(), Some("tickets"));
    assert_eq!(o.resource, "https://t.example.com/mcp");
    assert!(!format!("{o:?}").contains("\"s\""), "no secret in Debug");
    // The gateway's client is needed: it makes the exchange and lists the tools.
    let no_client = format!("{base}grant = \"token_exchange\"\nissuer = \"https://idp\"\n");
    let e = format!("{:#}", parse(&no_client).unwrap_err());
    assert!(e.contains("needs `client_id` and `client_secret`"), "{e}");
    // `audience` belongs to token exchange only; unknown keys are refused.
    let stray = format!("{base}issuer = \"https://idp\"\nclient_id = \"gw\"\nclient_secret = \"s\"\naudience = \"x\"\n");
    let e = format!("{:#}", parse(&stray).unwrap_err());
    assert!(
        e.contains("audience applies to grant = \"token_exchange\""),
        "{e}"
    );
    let unknown = format!("{ok}subject_token_type = \"jwt\"\n");
    assert!(format!("{:#}", parse(&unknown).unwrap_err()).contains("subject_token_type"));
    // Each caller gets a session of its own: Streamable HTTP only.
    let sse = ok.replace("/mcp\"\n", "/mcp\"\ntransport = \"sse\"\n");
    let e = format!("{:#}", parse(&sse).unwrap_err());
    assert!(e.contains("needs a Streamable HTTP server"), "{e}");
    let bad = format!("{base}grant = \"exchange\"\n");
    let e = format!("{:#}", parse(&bad).unwrap_err());
    assert!(e.contains("\"token_exchange\""), "{e}");
}
