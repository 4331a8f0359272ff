//! The least an HTTP-to-stdio MCP gateway can do, as a yardstick for `scripts/bench-load.sh`
//! (its `bare-relay` row): hyper on one port, one stdio child, each message's JSON-RPC id
//! rewritten to the relay's own and back, nothing else. No checks, no schemas, no sessions
//! (it answers `initialize` itself with a session id it never looks at), no SSE.
//!
//!     cargo run --release -p toolgate-fixture --example bare_relay -- PORT CMD [ARGS...]
//!
//! It prints `listening http://127.0.0.1:PORT/mcp` once the child has answered its own
//! `initialize`. Not a product: a gateway that did only this would pass any call to any
//! upstream, which is why the bench measures it and nobody should deploy it.

use axum::body::Body;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

type Answer = Result<hyper::Response<Body>, std::convert::Infallible>;

/// The calls in flight: the relay's id -> the client's id and who waits for the answer.
type Pending = Arc<Mutex<HashMap<u64, (Value, oneshot::Sender<Value>)>>>;

struct Relay {
    next: AtomicU64,
    pending: Pending,
    to_child: mpsc::UnboundedSender<Vec<u8>>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(port), Some(cmd)) = (args.first(), args.get(1)) else {
        anyhow::bail!("usage: bare_relay PORT CMD [ARGS...]");
    };
    let port: u16 = port.parse()?;
    let mut child = tokio::process::Command::new(cmd)
        .args(&args[2..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    stdin
        .write_all(
            concat!(
                r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","#,
                r#""capabilities":{},"clientInfo":{"name":"bare-relay","version":"1"}}}"#,
                "\n"
            )
            .as_bytes(),
        )
        .await?;
    let mut first = String::new();
    stdout.read_line(&mut first).await?;
    anyhow::ensure!(
        first.contains("\"result\""),
        "the child did not initialize: {first}"
    );
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await?;

    let (to_child, mut lines) = mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        while let Some(line) = lines.recv().await {
            if stdin.write_all(&line).await.is_err() {
                break;
            }
        }
    });
    let pending: Pending = Default::default();
    let answers = pending.clone();
    tokio::spawn(async move {
        let mut line = Vec::new();
        while matches!(stdout.read_until(b'\n', &mut line).await, Ok(n) if n > 0) {
            let message = serde_json::from_slice::<Value>(&line);
            line.clear();
            let Ok(mut message) = message else { continue };
            let Some(id) = message.get("id").and_then(Value::as_u64) else {
                continue; // a notification or a request of the child's: dropped
            };
            if let Some((theirs, waiter)) = answers.lock().expect("not poisoned").remove(&id) {
                message["id"] = theirs;
                let _ = waiter.send(message);
            }
        }
        // The child is gone: every waiter's sender is dropped with the map's entries.
        answers.lock().expect("not poisoned").clear();
    });

    let relay = Arc::new(Relay {
        next: AtomicU64::new(1),
        pending,
        to_child,
    });
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening http://{}/mcp", listener.local_addr()?);
    loop {
        let (socket, _) = listener.accept().await?;
        socket.set_nodelay(true)?;
        let relay = relay.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(relay.clone(), req));
            let io = hyper_util::rt::TokioIo::new(socket);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

async fn handle(relay: Arc<Relay>, req: hyper::Request<hyper::body::Incoming>) -> Answer {
    if req.method() != hyper::Method::POST {
        return Ok(status(405));
    }
    let Ok(body) = axum::body::to_bytes(Body::new(req.into_body()), 4 << 20).await else {
        return Ok(status(400));
    };
    let Ok(mut message) = serde_json::from_slice::<Value>(&body) else {
        return Ok(status(400));
    };
    let Some(theirs) = message.get("id").cloned() else {
        return Ok(status(202)); // a notification: the child's session was set up at start
    };
    if message["method"] == "initialize" {
        let answer = serde_json::json!({"jsonrpc": "2.0", "id": theirs, "result": {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "bare-relay", "version": "1"}}});
        let mut response = json(&answer);
        let id = hyper::header::HeaderValue::from_static("bare-relay");
        response.headers_mut().insert("mcp-session-id", id);
        return Ok(response);
    }
    let ours = relay.next.fetch_add(1, Ordering::Relaxed);
    message["id"] = ours.into();
    let (waiter, answer) = oneshot::channel();
    relay
        .pending
        .lock()
        .expect("not poisoned")
        .insert(ours, (theirs, waiter));
    let mut line = serde_json::to_vec(&message).expect("a Value serializes");
    line.push(b'\n');
    if relay.to_child.send(line).is_err() {
        return Ok(status(502));
    }
    match answer.await {
        Ok(answer) => Ok(json(&answer)),
        Err(_) => Ok(status(502)),
    }
}

fn json(message: &Value) -> hyper::Response<Body> {
    let body = serde_json::to_vec(message).expect("a Value serializes");
    let mut response = hyper::Response::new(Body::from(body));
    let kind = hyper::header::HeaderValue::from_static("application/json");
    response
        .headers_mut()
        .insert(hyper::header::CONTENT_TYPE, kind);
    response
}

fn status(code: u16) -> hyper::Response<Body> {
    let mut response = hyper::Response::new(Body::empty());
    *response.status_mut() = hyper::StatusCode::from_u16(code).expect("a valid status");
    response
}
