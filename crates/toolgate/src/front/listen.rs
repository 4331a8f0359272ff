//! `subscriptions/listen` (MCP 2026-07-28): the stream that replaces a session's
//! server-to-client notifications. A listening client is told when the tool list changes
//! (an upstream connected, dropped or changed its tools) and when any upstream's resources
//! or prompts change; the stream lasts until the client cancels it or the gateway stops.

use crate::gateway::Gateway;
use crate::upstream::Notice;
use rmcp::model::{
    PromptListChangedNotification, ResourceListChangedNotification, ServerNotification,
    SubscriptionFilter, ToolListChangedNotification,
};
use rmcp::service::SubscriptionContext;
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

/// What toolgate can deliver of what was asked: list changes only. Per-resource updates
/// stay with the older revisions' `resources/subscribe`.
pub(super) fn accepted(requested: &SubscriptionFilter) -> SubscriptionFilter {
    let mut out = SubscriptionFilter::new();
    out.tools_list_changed = requested.tools_list_changed.filter(|on| *on);
    out.prompts_list_changed = requested.prompts_list_changed.filter(|on| *on);
    out.resources_list_changed = requested.resources_list_changed.filter(|on| *on);
    out
}

/// Delivers the accepted notifications until the subscription ends.
pub(super) async fn run(gw: Arc<Gateway>, cx: SubscriptionContext) {
    let mut catalog = gw.subscribe();
    // Upstream notices arrive on one broadcast per upstream: merge them into one channel.
    let (tx, mut notices) = mpsc::channel::<Notice>(64);
    let mut forwards = Vec::new();
    for up in gw.upstreams() {
        let (mut rx, tx) = (up.notices(), tx.clone());
        forwards.push(tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok((_, n @ (Notice::ResourcesChanged | Notice::PromptsChanged))) => {
                        if tx.send(n).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) | Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                }
            }
        }));
    }
    drop(tx);
    let sink = cx.sink();
    let want = sink.accepted().clone();
    loop {
        let note = tokio::select! {
            _ = cx.cancelled() => break,
            r = catalog.changed() => match r {
                Ok(()) if want.tools_list_changed == Some(true) => {
                    ServerNotification::ToolListChangedNotification(ToolListChangedNotification::default())
                }
                Ok(()) => continue,
                Err(_) => break,
            },
            Some(n) = notices.recv() => match n {
                Notice::ResourcesChanged if want.resources_list_changed == Some(true) => {
                    ServerNotification::ResourceListChangedNotification(ResourceListChangedNotification::default())
                }
                Notice::PromptsChanged if want.prompts_list_changed == Some(true) => {
                    ServerNotification::PromptListChangedNotification(PromptListChangedNotification::default())
                }
                _ => continue,
            },
        };
        if sink.send(note).await.is_err() {
            break;
        }
    }
    for f in forwards {
        f.abort();
    }
}
