//! An answer larger than an upstream's `max_message_bytes`, over stdio and over HTTP: the
//! call fails at once with an error that names the limit (not, after the whole call
//! timeout, that the upstream did not answer; nor, over HTTP, that the connection closed),
//! and the upstream keeps serving.

mod common;
use common::*;
use serde_json::json;

#[tokio::test]
async fn an_answer_over_the_limit_fails_its_call_saying_so() {
    let dir = TestDir::new();
    let beta = HttpFixture::start(&dir, "beta");
    // A call timeout the test would notice: the old behaviour waited it out.
    let limit = "max_message_bytes = 1048576\ncall_timeout_secs = 600\n";
    let alpha = dir
        .stdio_upstream("alpha", "alpha", &[])
        .replace("call_timeout_secs = 20\n", limit);
    let beta_table = format!("[upstreams.beta]\nurl = {:?}\n{limit}", beta.url);
    let config = dir.config("mode = \"direct\"", &[alpha, beta_table]);
    let mut gateway = HttpGateway::start(&config, &[]);
    let (client, _n) = connect_http(&gateway.url).await;

    for (tool, up) in [("alpha_echo", "alpha"), ("beta_status", "beta")] {
        let args = json!({"message": "x", "_result_bytes": 2_000_000});
        let r = tokio::time::timeout(
            std::time::Duration::from_secs(300),
            call(&client, tool, args),
        )
        .await
        .unwrap_or_else(|_| panic!("{tool}: no answer in 300 s"));
        assert_eq!(r.is_error, Some(true), "{tool}");
        let msg = text(&r);
        assert!(
            msg.contains(&format!("upstreams.{up}.max_message_bytes = 1048576")),
            "{tool}: the error names the limit: {msg}"
        );
        // Said exactly, over HTTP too: not a guess among causes of a closed connection.
        assert!(
            !msg.contains("may have crashed")
                && (msg.contains("larger than") || msg.contains("more than")),
            "{tool}: the error says the answer was over the limit: {msg}"
        );
        // The upstream still serves an answer under the limit.
        let small = json!({"message": "y", "_result_bytes": 100_000});
        let r = call(&client, tool, small).await;
        assert_ne!(r.is_error, Some(true), "{tool}: {}", text(&r));
    }

    client.cancel().await.unwrap();
    gateway.stop();
    drop(beta);
    let left = wait_no_processes(&dir).await;
    assert!(left.is_empty(), "processes left behind: {left:?}");
}
