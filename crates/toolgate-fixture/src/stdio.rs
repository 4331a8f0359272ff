//! Serving over stdio: stdin in, stdout out, through a pump that restores raw tools and
//! (for `garbage-stdout`) mixes garbage lines between messages.

use rmcp::service::ServerInitializeError;
use rmcp::ServiceExt;
use std::os::fd::AsFd;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
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
    let (stdin, mut stdout) = stdio();
    if garbage {
        for line in [GARBAGE_BANNER.to_owned(), garbage_line(0)] {
            stdout.write_all(format!("{line}\n").as_bytes()).await?;
        }
        stdout.flush().await?;
    }
    let (rmcp_side, pump_side) = tokio::io::duplex(PUMP_BUFFER);
    let pump = tokio::spawn(pump(server.clone(), pump_side, stdout, garbage));
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

type Reader = Box<dyn AsyncRead + Send + Unpin>;
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// stdin and stdout through the IO reactor whenever they are pipes (rmcp's `stdio_pipes`)
/// or sockets (what Node's child processes get): tokio's own stdin and stdout hand every
/// read and write to a blocking thread, which costs more than the rest of a call, and a
/// blocked reader thread would hold up shutdown.
fn stdio() -> (Reader, Writer) {
    if let (Some(r), Some(w)) = (
        socket(std::io::stdin().as_fd()),
        socket(std::io::stdout().as_fd()),
    ) {
        return (Box::new(r), Box::new(w));
    }
    let (r, w) = rmcp::transport::stdio_pipes();
    (Box::new(r), Box::new(w))
}

/// `fd` as a non-blocking tokio socket, if it is a Unix socket. Unlike a pipe, a socket
/// cannot be reopened privately: `O_NONBLOCK` is set on the process's own descriptor too,
/// which nothing else in the fixture reads or writes.
fn socket(fd: std::os::fd::BorrowedFd<'_>) -> Option<tokio::net::UnixStream> {
    use std::os::unix::fs::FileTypeExt;
    let fd = fd.try_clone_to_owned().ok()?;
    let file = std::fs::File::from(fd);
    if !file.metadata().ok()?.file_type().is_socket() {
        return None;
    }
    let stream = std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(file));
    stream.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(stream).ok()
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
        let mut line = crate::wire::restore_raw_tools_text(&server, &line).unwrap_or(line);
        // One write a message: stdout is unbuffered.
        line.push('\n');
        out.write_all(line.as_bytes()).await?;
        sent += 1;
        if garbage {
            out.write_all(garbage_line(sent).as_bytes()).await?;
            out.write_all(b"\n").await?;
        }
        out.flush().await?;
    }
    Ok(())
}
