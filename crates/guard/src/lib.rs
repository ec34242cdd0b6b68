//! The one connection guard every door of Sextant goes through.
//!
//! A door is anything that reads bytes from outside the process and turns them into
//! commands: the TCP API, the WebSocket API, MCP on stdio and on TCP, and the web door of
//! `sextant serve` (the UI's pages and its `/ws`). Every one of them is a [`DoorKind`], and
//! every one gets its listener and its checks from a [`Guard`] – there is no other place in
//! Sextant that binds a listening socket (a test walks the source to keep it so), and a test
//! walks [`DoorKind::ALL`] with every attack in its matrix.
//!
//! What the guard decides, by kind of door:
//! - **Line doors** (TCP API, MCP): a line that looks like HTTP – what any web page can make
//!   a browser send to a localhost port, with JSON hidden in its body – closes the connection
//!   before anything it sent runs ([`Guard::check_not_http`], [`Guard::check_line`]).
//! - **HTTP doors** (WebSocket API, web door): the `Origin` must be a page this door served
//!   or one the user listed, and on a loopback bind the `Host` must name this machine and the
//!   door's port, so a DNS name rebound to 127.0.0.1 reads nothing ([`Guard::check_request`]).
//! - **Secrets**: any bind other than loopback needs a token; the web door needs a secret
//!   even on loopback – it is the person's door (a yes given there runs programs), and a
//!   local port alone proves nothing about who is calling. Without `--token` it makes a
//!   per-launch secret, printed in the URL that opens the UI ([`Guard::secret`]).
//! - **Caps**: message size and JSON nesting ([`Limits`]), clients per listener
//!   ([`Guard::admit`]), a token bucket per client ([`RateLimiter`]), and a back-off after
//!   wrong secrets shared by every connection of the door ([`Guard::authenticate`]).
//!
//! Consent is a capability, not a flag in a message: only a door that [`carries a person`]
//! (`DoorKind::carries_person`) may pass a person's yes on to the runtime, and only from a
//! connection that proved the door's secret.
//!
//! [`carries a person`]: DoorKind::carries_person

mod checks;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

pub use checks::{
    host_allowed, json_depth, looks_like_http, origin_allowed, split_origin, token_matches,
    AuthThrottle, Limits, RateLimiter, MAX_WRONG_TOKENS,
};

/// Every kind of door Sextant has. Adding a door means adding a kind here, and the attack
/// matrix (`crates/cli/tests/doors.rs`) then runs every attack against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DoorKind {
    /// `sextant serve --api`: newline-delimited JSON on TCP.
    TcpApi,
    /// `sextant serve --ws-port`: the API's messages over WebSocket, for other programs'
    /// pages the user listed.
    WebSocketApi,
    /// `sextant mcp`: MCP on standard input and output.
    McpStdio,
    /// `sextant mcp --tcp`: MCP on a loopback port.
    McpTcp,
    /// `sextant serve --http-port`: the UI's pages and its `/ws`, where a person sits.
    Web,
}

impl DoorKind {
    pub const ALL: [DoorKind; 5] = [
        DoorKind::TcpApi,
        DoorKind::WebSocketApi,
        DoorKind::McpStdio,
        DoorKind::McpTcp,
        DoorKind::Web,
    ];

    /// How a person names the door in messages and logs.
    pub fn name(self) -> &'static str {
        match self {
            DoorKind::TcpApi => "the TCP API",
            DoorKind::WebSocketApi => "the WebSocket API",
            DoorKind::McpStdio => "MCP on stdio",
            DoorKind::McpTcp => "MCP on TCP",
            DoorKind::Web => "the web UI",
        }
    }

    /// An HTTP door: browsers reach it by design, so `Origin` and `Host` are checked. A line
    /// door instead hangs up on anything that looks like HTTP.
    pub fn speaks_http(self) -> bool {
        matches!(self, DoorKind::WebSocketApi | DoorKind::Web)
    }

    /// Whether a person sits behind this door, so that a yes given through it (after its
    /// secret was proven) is a person's yes. API and MCP clients are programs: they act on
    /// the consent given by flags when they were started, never on a yes of their own.
    pub fn carries_person(self) -> bool {
        self == DoorKind::Web
    }

    /// Whether the door needs a secret even on a loopback bind.
    fn secret_on_loopback(self) -> bool {
        self.carries_person()
    }

    /// Whether the door may listen on an address other than loopback (with a secret).
    fn may_leave_loopback(self) -> bool {
        // MCP over a bare socket has no handshake to carry a token.
        !matches!(self, DoorKind::McpTcp | DoorKind::McpStdio)
    }
}

/// How a door is set up: its caps, the token the person chose, and the browser origins
/// they listed.
#[derive(Debug, Clone, Default)]
pub struct GuardOptions {
    pub limits: Limits,
    /// The person's token (`--token`); required off loopback. The web door makes one per
    /// launch when none is given.
    pub token: Option<String>,
    /// Browser origins the person allowed beyond the door's own pages (`--allow-origin`).
    pub allowed_origins: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error(
        "refusing to listen on {0} without a token: any other machine could control your devices; \
         set a token, or bind 127.0.0.1"
    )]
    TokenRequired(SocketAddr),
    #[error(
        "refusing to serve {door} on {addr}: it has no way to check a token, so it only listens \
         on a loopback address (127.0.0.1 or ::1)"
    )]
    NotLoopback {
        door: &'static str,
        addr: SocketAddr,
    },
    #[error("{0} does not listen on a port")]
    NotAListener(&'static str),
    #[error("could not listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Why the guard refused a connection or a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// HTTP sent to a line door: hang up without an answer.
    Http,
    /// A browser page from an origin that may not use this door.
    Origin(String),
    /// A `Host` that does not name this door (a rebound DNS name).
    Host(String),
    /// The message is larger than the door's cap.
    TooBig(usize),
    /// The message nests deeper than the door's cap.
    TooDeep(usize),
}

impl Refusal {
    /// What the client is told (nothing for HTTP on a line door: it only gets hung up on).
    pub fn message(&self) -> String {
        match self {
            Refusal::Http => "HTTP is not spoken here".into(),
            Refusal::Origin(o) => format!("origin {o} may not use this server"),
            Refusal::Host(h) => {
                format!("host {h} does not name this server; open it as 127.0.0.1 or localhost")
            }
            Refusal::TooBig(n) => format!("message exceeds {n} bytes and was discarded"),
            Refusal::TooDeep(n) => format!("JSON nested deeper than {n} levels"),
        }
    }
}

/// One door's guard: shared by every connection of that door.
#[derive(Debug)]
pub struct Guard {
    kind: DoorKind,
    limits: Limits,
    secret: Option<String>,
    origins: Vec<String>,
    /// The port the door listens on (0 for stdio).
    port: u16,
    /// Bound to an address other than loopback.
    lan: bool,
    throttle: AuthThrottle,
    clients: AtomicUsize,
    refused_http: AtomicU64,
}

/// A client's place among a door's clients; the place frees when this drops.
#[derive(Debug)]
pub struct Slot(Arc<Guard>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Guard {
    /// Binds `addr` for a door of `kind` – the only way a door gets a listening socket – and
    /// the guard its connections go through. Port 0 picks a free port.
    pub async fn listen(
        kind: DoorKind,
        addr: SocketAddr,
        options: GuardOptions,
    ) -> Result<(Arc<Guard>, tokio::net::TcpListener), GuardError> {
        if kind == DoorKind::McpStdio {
            return Err(GuardError::NotAListener(kind.name()));
        }
        let loopback = addr.ip().is_loopback();
        if !loopback && !kind.may_leave_loopback() {
            return Err(GuardError::NotLoopback {
                door: kind.name(),
                addr,
            });
        }
        let token = options.token.filter(|t| !t.is_empty());
        if !loopback && token.is_none() {
            return Err(GuardError::TokenRequired(addr));
        }
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| GuardError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| GuardError::Bind { addr, source })?;
        let secret = match token {
            Some(t) => Some(t),
            None if kind.secret_on_loopback() => Some(new_secret()),
            None => None,
        };
        let guard = Guard::new(kind, options.limits, secret, options.allowed_origins);
        let guard = Guard {
            port: local.port(),
            lan: !loopback,
            ..guard
        };
        Ok((Arc::new(guard), listener))
    }

    /// The guard of a door on standard input and output (MCP): the person who started the
    /// process is the one at the other end, so there is no secret and no listener.
    pub fn stdio(kind: DoorKind, limits: Limits) -> Arc<Guard> {
        Arc::new(Guard::new(kind, limits, None, Vec::new()))
    }

    fn new(kind: DoorKind, limits: Limits, secret: Option<String>, origins: Vec<String>) -> Guard {
        Guard {
            kind,
            limits,
            secret,
            origins,
            port: 0,
            lan: false,
            throttle: AuthThrottle::default(),
            clients: AtomicUsize::new(0),
            refused_http: AtomicU64::new(0),
        }
    }

    pub fn kind(&self) -> DoorKind {
        self.kind
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The door's secret: what a client proves with `{"type":"auth","token":…}` before
    /// anything else; `None` when the door needs none (a loopback API or MCP door).
    pub fn secret(&self) -> Option<&str> {
        self.secret.as_deref()
    }

    /// Whether a client must prove the secret before anything else.
    pub fn needs_auth(&self) -> bool {
        self.secret.is_some()
    }

    /// Whether a connection that proved the secret (or needed none) may pass a person's
    /// yes on to the runtime.
    pub fn carries_person(&self) -> bool {
        self.kind.carries_person() && self.secret.is_some()
    }

    /// Bound to an address other than loopback.
    pub fn is_lan(&self) -> bool {
        self.lan
    }

    /// A place for one more client, or `None` when the door is full.
    pub fn admit(self: &Arc<Self>) -> Option<Slot> {
        let taken = self.clients.fetch_add(1, Ordering::SeqCst);
        let slot = Slot(self.clone());
        (taken < self.limits.max_clients).then_some(slot)
    }

    /// A line door's bytes, of a whole line or of one not yet ended (a request line is
    /// known before its line ends, so the door hangs up at once): HTTP, or not.
    pub fn check_not_http(&self, pending: &[u8]) -> Result<(), Refusal> {
        self.sniff(pending)
    }

    /// A line door's whole line (newline excluded): HTTP, size and nesting.
    pub fn check_line(&self, line: &[u8]) -> Result<(), Refusal> {
        self.sniff(line)?;
        self.check_message(line)
    }

    /// A message's size and nesting, before any parser sees it.
    pub fn check_message(&self, text: &[u8]) -> Result<(), Refusal> {
        if text.len() > self.limits.max_message_bytes {
            return Err(Refusal::TooBig(self.limits.max_message_bytes));
        }
        if json_depth(text) > self.limits.max_depth {
            return Err(Refusal::TooDeep(self.limits.max_depth));
        }
        Ok(())
    }

    fn sniff(&self, bytes: &[u8]) -> Result<(), Refusal> {
        if !self.kind.speaks_http() && looks_like_http(bytes) {
            self.refused_http.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                "{}: closed a connection that sent an HTTP request (a web page trying to \
                 reach this port?)",
                self.kind.name()
            );
            return Err(Refusal::Http);
        }
        Ok(())
    }

    /// An HTTP door's request (the WebSocket handshake, or a page): `Origin` – absent for
    /// programs, which then prove the secret like anyone – must be a page this door served
    /// or one the person listed; on a loopback bind the `Host` must name this machine and
    /// this port.
    pub fn check_request(&self, origin: Option<&str>, host: Option<&str>) -> Result<(), Refusal> {
        if !self.lan {
            let host = host.unwrap_or("");
            if !host_allowed(host, self.port, &self.origins) {
                return Err(Refusal::Host(host.to_string()));
            }
        }
        let Some(origin) = origin else {
            return Ok(());
        };
        // Pages are served by the web door only; on a LAN bind (token required) its pages
        // are addressed by whatever name the machine has, so its own origin is the Host's.
        let own_pages = (self.kind == DoorKind::Web).then_some(self.port);
        let same_origin_on_lan = self.lan
            && own_pages.is_some()
            && host.is_some_and(|h| origin == format!("http://{h}"));
        if same_origin_on_lan || origin_allowed(origin, own_pages, &self.origins) {
            Ok(())
        } else {
            Err(Refusal::Origin(origin.to_string()))
        }
    }

    /// Whether `given` is the door's secret. A wrong one waits longer each time, across
    /// every connection of the door; a right one resets the count.
    pub async fn authenticate(&self, given: &str) -> bool {
        let ok = self
            .secret
            .as_deref()
            .is_none_or(|expected| token_matches(given, expected));
        if ok {
            self.throttle.succeeded();
        } else {
            tokio::time::sleep(self.throttle.failed()).await;
        }
        ok
    }

    /// Connections closed because they sent HTTP to a line door.
    pub fn refused_http_requests(&self) -> u64 {
        self.refused_http.load(Ordering::Relaxed)
    }
}

/// A per-launch secret: 32 random bytes as hex (URL-safe, as it goes in the UI's URL).
fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    if let Err(e) = getrandom::fill(&mut bytes) {
        // Without randomness there is no secret worth the name: refuse every client.
        tracing::error!("the OS gave no randomness for the door's secret: {e}");
        panic!("no randomness for the web door's secret: {e}");
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(kind: DoorKind, port: u16, lan: bool) -> Guard {
        Guard {
            port,
            lan,
            ..Guard::new(kind, Limits::default(), Some("s".into()), Vec::new())
        }
    }

    #[test]
    fn line_doors_hang_up_on_http_and_http_doors_do_not_sniff() {
        for kind in DoorKind::ALL {
            let g = guard(kind, 7777, false);
            let got = g.check_line(b"POST / HTTP/1.1");
            if kind.speaks_http() {
                assert_eq!(got, Ok(()), "{kind:?}");
            } else {
                assert_eq!(got, Err(Refusal::Http), "{kind:?}");
                assert_eq!(g.check_not_http(b"GET /"), Err(Refusal::Http));
                assert_eq!(g.refused_http_requests(), 2);
            }
        }
    }

    #[test]
    fn http_doors_check_origin_and_host() {
        let web = guard(DoorKind::Web, 7777, false);
        let host = Some("127.0.0.1:7777");
        assert_eq!(
            web.check_request(Some("http://127.0.0.1:7777"), host),
            Ok(())
        );
        assert_eq!(web.check_request(None, host), Ok(()));
        assert!(matches!(
            web.check_request(Some("https://evil.example"), host),
            Err(Refusal::Origin(_))
        ));
        assert!(matches!(
            web.check_request(None, Some("evil.example:7777")),
            Err(Refusal::Host(_))
        ));
        assert!(matches!(
            web.check_request(None, None),
            Err(Refusal::Host(_))
        ));
        // The WebSocket API serves no page: not even its own port's origin.
        let ws = guard(DoorKind::WebSocketApi, 7778, false);
        assert!(matches!(
            ws.check_request(Some("http://127.0.0.1:7778"), Some("127.0.0.1:7778")),
            Err(Refusal::Origin(_))
        ));
        // On a LAN bind the page's own origin is whatever name it was opened by.
        let lan = guard(DoorKind::Web, 7777, true);
        let h = Some("192.168.1.5:7777");
        assert_eq!(
            lan.check_request(Some("http://192.168.1.5:7777"), h),
            Ok(())
        );
        assert!(lan.check_request(Some("http://evil.example"), h).is_err());
    }

    #[test]
    fn only_the_web_door_carries_a_person_and_it_always_has_a_secret() {
        let kinds: Vec<_> = DoorKind::ALL
            .into_iter()
            .filter(|k| k.carries_person())
            .collect();
        assert_eq!(kinds, [DoorKind::Web]);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let addr = "127.0.0.1:0".parse().unwrap();
            let (g, _l) = Guard::listen(DoorKind::Web, addr, GuardOptions::default())
                .await
                .unwrap();
            let secret = g.secret().expect("a per-launch secret").to_string();
            assert_eq!(secret.len(), 64);
            assert!(g.carries_person());
            let (again, _l) = Guard::listen(DoorKind::Web, addr, GuardOptions::default())
                .await
                .unwrap();
            assert_ne!(again.secret(), Some(secret.as_str()), "one per launch");
            let (api, _l) = Guard::listen(DoorKind::TcpApi, addr, GuardOptions::default())
                .await
                .unwrap();
            assert!(!api.needs_auth() && !api.carries_person());
            let lan = "0.0.0.0:0".parse().unwrap();
            assert!(matches!(
                Guard::listen(DoorKind::TcpApi, lan, GuardOptions::default()).await,
                Err(GuardError::TokenRequired(_))
            ));
            let with_token = GuardOptions {
                token: Some("t".into()),
                ..GuardOptions::default()
            };
            assert!(matches!(
                Guard::listen(DoorKind::McpTcp, lan, with_token).await,
                Err(GuardError::NotLoopback { .. })
            ));
        });
    }

    #[test]
    fn a_full_door_admits_nobody_until_a_place_frees() {
        let g = Arc::new(Guard::new(
            DoorKind::TcpApi,
            Limits {
                max_clients: 2,
                ..Limits::default()
            },
            None,
            Vec::new(),
        ));
        let a = g.admit().unwrap();
        let _b = g.admit().unwrap();
        assert!(g.admit().is_none());
        drop(a);
        assert!(g.admit().is_some());
    }
}
