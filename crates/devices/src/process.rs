//! A child process's stdout (and stderr) as a source, and named pipes (FIFOs).

use bytes::{Bytes, BytesMut};
use sextant_telemetry::Timestamp;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use crate::source::{DeviceError, Driver, Link};

/// Launches a program and reads what it prints; writes go to its stdin.
pub struct ProcessDriver {
    pub program: String,
    pub args: Vec<String>,
    pub working_dir: Option<String>,
    /// Also read stderr (interleaved with stdout as it arrives).
    pub include_stderr: bool,
}

impl Driver for ProcessDriver {
    type Link = ProcessLink;

    fn describe(&self) -> String {
        format!("process {}", self.program)
    }

    async fn open(&mut self) -> Result<ProcessLink, DeviceError> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(if self.include_stderr {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::null()
            })
            .kill_on_drop(true);
        if let Some(dir) = &self.working_dir {
            cmd.current_dir(dir);
        }
        let mut child = cmd.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                DeviceError::fatal(format!("program `{}` was not found", self.program))
            }
            std::io::ErrorKind::PermissionDenied => {
                DeviceError::fatal(format!("program `{}` is not executable", self.program))
            }
            _ => DeviceError::fatal(format!("could not start `{}`: {e}", self.program)),
        })?;
        let (tx, rx) = mpsc::channel(256);
        if let Some(out) = child.stdout.take() {
            tokio::spawn(pump(out, tx.clone()));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(pump(err, tx.clone()));
        }
        drop(tx);
        Ok(ProcessLink {
            stdin: child.stdin.take(),
            child,
            rx,
        })
    }
}

async fn pump(mut from: impl AsyncRead + Unpin, tx: mpsc::Sender<Bytes>) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        buf.reserve(64 * 1024);
        match from.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if tx.send(buf.split().freeze()).await.is_err() {
                    return;
                }
            }
        }
    }
}

pub struct ProcessLink {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<Bytes>,
}

impl Link for ProcessLink {
    async fn read(&mut self) -> Result<Option<(Bytes, Option<Timestamp>)>, DeviceError> {
        match self.rx.recv().await {
            Some(data) => Ok(Some((data, None))),
            None => {
                // Both pipes closed: report how the program ended.
                let status = self.child.wait().await.ok();
                Err(DeviceError::transient(
                    match status.and_then(|s| s.code()) {
                        Some(0) => "the program exited".to_string(),
                        Some(code) => format!("the program exited with status {code}"),
                        None => "the program was terminated".to_string(),
                    },
                ))
            }
        }
    }

    async fn write(&mut self, data: Bytes) -> Result<(), DeviceError> {
        let stdin = self.stdin.as_mut().ok_or(DeviceError::NotWritable)?;
        stdin
            .write_all(&data)
            .await
            .map_err(|e| DeviceError::transient(format!("writing to the program failed: {e}")))?;
        stdin
            .flush()
            .await
            .map_err(|e| DeviceError::transient(format!("writing to the program failed: {e}")))
    }
}

/// Reads a named pipe (FIFO), staying connected as writers come and go.
///
/// FIFOs are a Unix thing; elsewhere opening one fails with an error that says so (Windows'
/// named pipes are a different, server-and-client API).
pub struct NamedPipeDriver {
    pub path: String,
}

#[cfg(unix)]
pub struct PipeLink {
    pipe: tokio::net::unix::pipe::Receiver,
    buf: BytesMut,
}

/// Never made: [`NamedPipeDriver::open`] fails on this platform.
#[cfg(not(unix))]
pub struct PipeLink {
    never: std::convert::Infallible,
}

impl Driver for NamedPipeDriver {
    type Link = PipeLink;

    fn describe(&self) -> String {
        format!("pipe {}", self.path)
    }

    #[cfg(unix)]
    async fn open(&mut self) -> Result<PipeLink, DeviceError> {
        // Read-write on purpose: a FIFO opened read-only blocks the open until a writer
        // comes, and reads end-of-file whenever the last writer closes, so data written
        // between two writers could be lost while reconnecting. Holding a write end
        // ourselves keeps the pipe open across writers; reads just wait for the next one.
        // tokio's pipe receiver polls the FIFO (no blocking thread), so a read waiting for
        // a writer can always be cancelled.
        let pipe = tokio::net::unix::pipe::OpenOptions::new()
            .read_write(true)
            .open_receiver(&self.path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => {
                    DeviceError::transient(format!("{} does not exist yet", self.path))
                }
                std::io::ErrorKind::PermissionDenied => {
                    DeviceError::fatal(format!("permission denied reading {}", self.path))
                }
                _ => DeviceError::transient(format!("could not open {}: {e}", self.path)),
            })?;
        Ok(PipeLink {
            pipe,
            buf: BytesMut::with_capacity(64 * 1024),
        })
    }

    #[cfg(not(unix))]
    async fn open(&mut self) -> Result<PipeLink, DeviceError> {
        Err(DeviceError::fatal(format!(
            "{}: named pipes (FIFOs) are a Unix feature; on this system read the data \
             through a process source or a TCP/UDP socket",
            self.path
        )))
    }
}

impl Link for PipeLink {
    #[cfg(unix)]
    async fn read(&mut self) -> Result<Option<(Bytes, Option<Timestamp>)>, DeviceError> {
        self.buf.reserve(64 * 1024);
        match self.pipe.read_buf(&mut self.buf).await {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some((self.buf.split().freeze(), None))),
            Err(e) => Err(DeviceError::transient(format!("pipe read failed: {e}"))),
        }
    }

    #[cfg(not(unix))]
    async fn read(&mut self) -> Result<Option<(Bytes, Option<Timestamp>)>, DeviceError> {
        match self.never {}
    }
}
