//! TCP client (plain or TLS) and UDP (unicast or multicast) sources.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use bytes::{Bytes, BytesMut};
use sextant_telemetry::Timestamp;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{lookup_host, TcpStream, UdpSocket};

use crate::source::{DeviceError, Driver, Link};
use crate::tls::{client_config, server_name, Credentials};

const READ_BUFFER: usize = 64 * 1024;

/// Connects to `host:port` and reads the stream, over TLS when `tls` is set.
pub struct TcpDriver {
    pub host: String,
    pub port: u16,
    /// TLS, checking the device's certificate against `credentials`' CA (else the system's
    /// roots) and presenting its client certificate when there is one.
    pub tls: bool,
    pub credentials: Credentials,
}

impl TcpDriver {
    /// A plain TCP client.
    pub fn plain(host: impl Into<String>, port: u16) -> TcpDriver {
        TcpDriver {
            host: host.into(),
            port,
            tls: false,
            credentials: Credentials::default(),
        }
    }
}

impl Driver for TcpDriver {
    type Link = TcpLink;

    fn describe(&self) -> String {
        let scheme = if self.tls { "tls" } else { "tcp" };
        format!("{scheme} {}:{}", self.host, self.port)
    }

    async fn open(&mut self) -> Result<TcpLink, DeviceError> {
        // Checked before connecting: a bad certificate file is not worth a retry.
        let tls = if self.tls {
            Some((
                client_config(&self.credentials, None)?,
                server_name(&self.host)?,
            ))
        } else {
            None
        };
        let addr = format!("{}:{}", self.host, self.port);
        let stream = TcpStream::connect(&addr)
            .await
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::ConnectionRefused => DeviceError::transient(format!(
                    "{addr} refused the connection (is the device listening?)"
                )),
                _ => DeviceError::transient(format!("could not connect to {addr}: {e}")),
            })?;
        let _ = stream.set_nodelay(true);
        let stream = match tls {
            None => Stream::Plain(stream),
            Some((config, name)) => {
                let connector = tokio_rustls::TlsConnector::from(config);
                let tls = tokio::time::timeout(TLS_HANDSHAKE, connector.connect(name, stream))
                    .await
                    .map_err(|_| {
                        DeviceError::transient(format!(
                            "{addr} accepted the connection but did not finish the TLS handshake"
                        ))
                    })?
                    .map_err(|e| DeviceError::transient(format!("TLS with {addr} failed: {e}")))?;
                Stream::Tls(Box::new(tls))
            }
        };
        Ok(TcpLink {
            stream,
            buf: BytesMut::with_capacity(READ_BUFFER),
        })
    }
}

/// How long a TLS handshake may take once the TCP connection is up.
const TLS_HANDSHAKE: std::time::Duration = std::time::Duration::from_secs(10);

enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

pub struct TcpLink {
    stream: Stream,
    buf: BytesMut,
}

impl Link for TcpLink {
    async fn read(&mut self) -> Result<Option<(Bytes, Option<Timestamp>)>, DeviceError> {
        self.buf.reserve(READ_BUFFER);
        // `read_buf` is cancel-safe on a socket and on a TLS stream alike: nothing is
        // consumed unless it completes (rustls keeps decrypted bytes until they are read).
        let read = match &mut self.stream {
            Stream::Plain(s) => s.read_buf(&mut self.buf).await,
            Stream::Tls(s) => s.read_buf(&mut self.buf).await,
        };
        match read {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some((self.buf.split().freeze(), None))),
            Err(e) => Err(DeviceError::transient(format!("connection lost: {e}"))),
        }
    }

    async fn write(&mut self, data: Bytes) -> Result<(), DeviceError> {
        let written = match &mut self.stream {
            Stream::Plain(s) => s.write_all(&data).await,
            Stream::Tls(s) => match s.write_all(&data).await {
                // TLS buffers records: push them out now, as a plain socket would.
                Ok(()) => s.flush().await,
                Err(e) => Err(e),
            },
        };
        written.map_err(|e| DeviceError::transient(format!("send failed: {e}")))
    }
}

/// Receives datagrams; one datagram is one chunk.
pub struct UdpDriver {
    pub local_port: u16,
    pub remote_host: Option<String>,
    pub remote_port: Option<u16>,
    pub multicast_group: Option<String>,
    /// IPv4 address of the interface to join on; any interface when absent.
    pub multicast_interface: Option<String>,
}

impl Driver for UdpDriver {
    type Link = UdpLink;

    fn describe(&self) -> String {
        match &self.multicast_group {
            Some(g) => format!("udp multicast {g}:{}", self.local_port),
            None => format!("udp :{}", self.local_port),
        }
    }

    async fn open(&mut self) -> Result<UdpLink, DeviceError> {
        let group: Option<Ipv4Addr> = match &self.multicast_group {
            Some(g) => Some(g.parse().map_err(|_| {
                DeviceError::fatal(format!(
                    "`{g}` is not an IPv4 multicast address (224.0.0.0/4)"
                ))
            })?),
            None => None,
        };
        if let Some(g) = group {
            if !g.is_multicast() {
                return Err(DeviceError::fatal(format!(
                    "{g} is not a multicast address (224.0.0.0/4)"
                )));
            }
        }
        let bind = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), self.local_port);
        let socket = UdpSocket::bind(bind).await.map_err(|e| match e.kind() {
            std::io::ErrorKind::AddrInUse => {
                DeviceError::fatal(format!("UDP port {} is already in use", self.local_port))
            }
            _ => {
                DeviceError::transient(format!("could not bind UDP port {}: {e}", self.local_port))
            }
        })?;
        let interface: Ipv4Addr = match &self.multicast_interface {
            Some(i) => i.parse().map_err(|_| {
                DeviceError::fatal(format!("`{i}` is not an IPv4 interface address"))
            })?,
            None => Ipv4Addr::UNSPECIFIED,
        };
        if let Some(g) = group {
            socket.join_multicast_v4(g, interface).map_err(|e| {
                DeviceError::fatal(format!(
                    "could not join multicast group {g} on interface {interface}: {e}"
                ))
            })?;
        }
        let remote = match (&self.remote_host, self.remote_port) {
            (Some(h), Some(p)) => lookup_host((h.as_str(), p))
                .await
                .map_err(|e| DeviceError::transient(format!("could not resolve {h}: {e}")))?
                .next(),
            _ => None,
        };
        Ok(UdpLink {
            socket,
            remote,
            buf: vec![0u8; 65_536],
        })
    }
}

pub struct UdpLink {
    socket: UdpSocket,
    remote: Option<SocketAddr>,
    buf: Vec<u8>,
}

impl UdpLink {
    /// The local address actually bound (useful with local port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.socket.local_addr().ok()
    }
}

impl Link for UdpLink {
    async fn read(&mut self) -> Result<Option<(Bytes, Option<Timestamp>)>, DeviceError> {
        loop {
            match self.socket.recv_from(&mut self.buf).await {
                Ok((n, from)) => {
                    // Replies go to whoever spoke last when no remote is configured.
                    if self.remote.is_none() {
                        self.remote = Some(from);
                    }
                    return Ok(Some((Bytes::copy_from_slice(&self.buf[..n]), None)));
                }
                // An ICMP "port unreachable" from an earlier send surfaces here on Linux;
                // it says nothing about incoming data.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(DeviceError::transient(format!("UDP receive failed: {e}"))),
            }
        }
    }

    async fn write(&mut self, data: Bytes) -> Result<(), DeviceError> {
        let remote = self.remote.ok_or_else(|| {
            DeviceError::fatal("no remote host/port is set and nothing has been received yet")
        })?;
        self.socket
            .send_to(&data, remote)
            .await
            .map(|_| ())
            .map_err(|e| DeviceError::transient(format!("UDP send to {remote} failed: {e}")))
    }
}
