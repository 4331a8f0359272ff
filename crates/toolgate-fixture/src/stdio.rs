//! Serving over stdio: stdin in, stdout out, through a pump that restores raw tools and
//! (for `garbage-stdout`) mixes garbage lines between messages.

use rmcp::service::ServerInitializeError;
use rmcp::ServiceExt;
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio_util::sync::CancellationToken;

use crate::faults::{garbage_line, GARBAGE_BANNER};
use crate::server::FixtureServer;

/// Buffer between rmcp's writer and the stdout pump.
const PUMP_BUFFER: usize = 64 * 1024;

/// Serves `server` on stdin/stdout until stdin closes or `shutdown` fires.
pub async fn serve_stdio(
    server: FixtureServer,
    garbage: bool,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut stdout = tokio::io::stdout();
    if garbage {
        for line in [GARBAGE_BANNER.to_owned(), garbage_line(0)] {
            stdout.write_all(format!("{line}\n").as_bytes()).await?;
        }
        stdout.flush().await?;
    }
    let (rmcp_side, pump_side) = tokio::io::duplex(PUMP_BUFFER);
    let pump = tokio::spawn(pump(server.clone(), pump_side, stdout, garbage));
    // stdio_pipes reads through the IO reactor when stdin is a pipe, so shutdown does not
    // wait on a blocked reader thread.
    let (stdin, _) = rmcp::transport::stdio_pipes();
    let serving = tokio::select! {
        serving = server.serve((stdin, rmcp_side)) => match serving {
            Ok(serving) => serving,
            // A client that goes away before initializing is a normal end, not a failure.
            Err(ServerInitializeError::ConnectionClosed(context)) => {
                tracing::info!(%context, "stdin closed before initialize");
                return Ok(());
            }
            Err(error) => {
                // The refusal rmcp wrote (e.g. -32022 to `initialize` with --modern-only)
                // is still in the pump: deliver it before exiting.
                let _ = pump.await;
                return Err(error.into());
            }
        },
        _ = shutdown.cancelled() => return Ok(()),
    };
    tokio::select! {
        quit = serving.waiting() => match quit {
            Ok(_) => tracing::info!("stdio session ended"),
            Err(e) => tracing::warn!("stdio session ended: {e}"),
        },
        _ = shutdown.cancelled() => { tracing::info!("shutting down"); }
    }
    // rmcp's side of the duplex is dropped with the service; the pump drains and ends.
    let _ = pump.await;
    Ok(())
}

/// Copies rmcp's output lines to `out`, restoring raw tools, optionally adding garbage.
async fn pump(
    server: FixtureServer,
    from: DuplexStream,
    mut out: impl AsyncWrite + Unpin,
    garbage: bool,
) -> std::io::Result<()> {
    let mut lines = BufReader::new(from).lines();
    let mut sent = 0u64;
    while let Some(line) = lines.next_line().await? {
        let line = crate::wire::restore_raw_tools_text(&server, &line).unwrap_or(line);
        out.write_all(line.as_bytes()).await?;
        out.write_all(b"\n").await?;
        sent += 1;
        if garbage {
            out.write_all(garbage_line(sent).as_bytes()).await?;
            out.write_all(b"\n").await?;
        }
        out.flush().await?;
    }
    Ok(())
}
