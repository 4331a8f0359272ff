//! `--knobs FILE` sets per-tool default knobs; a call's own knob arguments override them.
mod common;

use common::{command, connect, demo, refs, temp_file, text_of, TRANSPORTS};
use serde_json::json;

#[tokio::test]
async fn file_knobs_apply_per_tool_and_calls_override() -> anyhow::Result<()> {
    let knobs = temp_file(
        "knobs.json",
        r#"{"send_email": {"_error": "smtp relay down"}, "list_inbox": {"_result_bytes": 4321}}"#,
    );
    for transport in TRANSPORTS {
        let mut args = demo("mail");
        args.extend(["--knobs".into(), knobs.to_str().unwrap().into()]);
        let session = connect(transport, &refs(&args)).await?;
        let failed = session.call("send_email", json!({"to": ["a@b.c"]})).await?;
        assert_eq!(failed.is_error, Some(true), "{transport:?}");
        assert_eq!(text_of(&failed), "smtp relay down");

        let overridden = session
            .call("send_email", json!({"_error": "quota exceeded"}))
            .await?;
        assert_eq!(
            text_of(&overridden),
            "quota exceeded",
            "the call's knob wins"
        );

        // A knob whose effect is in the answer (not in the time it takes).
        let sized = session.call("list_inbox", json!({})).await?;
        assert_eq!(text_of(&sized).len(), 4321, "{transport:?}");

        let ok = session
            .call("create_draft", json!({"subject": "s", "body": "b"}))
            .await?;
        assert_ne!(ok.is_error, Some(true), "other tools are untouched");
        session.close().await;
    }
    Ok(())
}

#[tokio::test]
async fn an_unknown_knob_in_the_file_is_a_startup_error() -> anyhow::Result<()> {
    let knobs = temp_file("bad-knobs.json", r#"{"send_email": {"_dealy_ms": 5}}"#);
    let output = command(&[
        "--demo",
        "--server",
        "mail",
        "--knobs",
        knobs.to_str().unwrap(),
    ])
    .stderr(std::process::Stdio::piped())
    .output()
    .await?;
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("_dealy_ms"));
    Ok(())
}
