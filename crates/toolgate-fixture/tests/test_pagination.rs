//! `--page-size N` splits `tools/list` into pages joined by `nextCursor`.
mod common;

use common::{connect, demo, refs, TRANSPORTS};
use rmcp::model::PaginatedRequestParams;

#[tokio::test]
async fn pages_follow_cursors_to_the_whole_list() -> anyhow::Result<()> {
    for transport in TRANSPORTS {
        let mut args = demo("tickets");
        args.extend(["--page-size".into(), "4".into()]);
        let session = connect(transport, &refs(&args)).await?;
        let first = session.client.list_tools(None).await?;
        assert_eq!(first.tools.len(), 4, "{transport:?}");
        let cursor = first.next_cursor.clone().expect("more pages");
        let second = session
            .client
            .list_tools(Some(
                PaginatedRequestParams::default().with_cursor(Some(cursor)),
            ))
            .await?;
        assert_eq!(second.tools.len(), 4);
        assert_ne!(first.tools[0].name, second.tools[0].name);

        let mut all = Vec::new();
        let mut cursor = None;
        let mut pages = 0;
        loop {
            let page = session
                .client
                .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
                .await?;
            pages += 1;
            all.extend(page.tools);
            cursor = page.next_cursor;
            if cursor.is_none() {
                break;
            }
        }
        assert_eq!(all.len(), 11);
        assert_eq!(pages, 3);
        assert_eq!(session.client.list_all_tools().await?, all);
        session.close().await;
    }
    Ok(())
}

#[tokio::test]
async fn a_bad_cursor_is_an_error() -> anyhow::Result<()> {
    let mut args = demo("tickets");
    args.extend(["--page-size".into(), "4".into()]);
    let session = connect(common::Transport::Stdio, &refs(&args)).await?;
    let bad = PaginatedRequestParams::default().with_cursor(Some("not-a-cursor".into()));
    assert!(session.client.list_tools(Some(bad)).await.is_err());
    session.close().await;
    Ok(())
}
