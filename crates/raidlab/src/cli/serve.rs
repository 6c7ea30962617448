//! Arguments of `raidlab serve`.

use super::*;

#[derive(Debug, Args)]
#[command(after_long_help = SERVE_HELP)]
pub struct ServeArgs {
    /// The members of one array to serve (any order), or with --plain one file or
    /// block device.
    pub members: Vec<PathBuf>,
    /// Serve the exports a TOML file describes instead (format below).
    #[arg(long, short = 'C')]
    pub config: Option<PathBuf>,
    /// Export name (default: the array's name, or the file's name). Clients that
    /// ask for the empty name get the first export.
    #[arg(long, short = 'N')]
    pub name: Option<String>,
    /// Serve a plain file or block device as it is, not as an array.
    #[arg(long)]
    pub plain: bool,
    /// Serve the array (or --plain file) behind the raidlab cache on this
    /// device (made by `raidlab cache create` for that origin), named as the
    /// cache verbs name it: `serve --cache DEV ORIGIN...`.
    #[arg(long, value_name = "DEV")]
    pub cache: Option<PathBuf>,
    /// Refuse writes (clients get EPERM); members are opened read-only.
    #[arg(long)]
    pub read_only: bool,
    /// Start a degraded array that was not stopped cleanly.
    #[arg(long, alias = "start-degraded-dirty")]
    pub force: bool,
    /// The backup file of a metadata 0.90 restripe stopped part-way (one
    /// started with `grow --backup-file`), which is not served without it,
    /// as md does not assemble it without it. As `mdadm --assemble
    /// --backup-file` does, the window the file holds is put back into the
    /// members first; the array is then served and the restripe carries on
    /// in the background through the same file.
    #[arg(long, value_name = "FILE")]
    pub backup_file: Option<PathBuf>,
    #[command(flatten)]
    pub stripe: StripeCacheArgs,
    /// md's journal mode for an array with a write journal: write-through
    /// (data and parity on the members before a write is acknowledged) or
    /// write-back (acknowledged once the data is in the journal; stripes go
    /// to the members later, whole when they fill). md's default is
    /// write-through; write-back needs a journal (RAID 4/5/6).
    #[arg(long, value_name = "MODE", value_enum, default_value_t = JournalModeArg::WriteThrough)]
    pub journal_mode: JournalModeArg,
    #[command(flatten)]
    pub io: MemberIoArgs,
    /// Unix socket path (the default listener; default
    /// $XDG_RUNTIME_DIR/raidlab-nbd.sock or /tmp/raidlab-nbd-UID.sock).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Listen on TCP 127.0.0.1 (loopback only) instead of a Unix socket.
    #[arg(long)]
    pub tcp: bool,
    /// TCP port for --tcp (default 10809).
    #[arg(long)]
    pub port: Option<u16>,
    /// Listen on any TCP address:port, e.g. 0.0.0.0:10809 (warns: no TLS).
    #[arg(long)]
    pub listen: Option<String>,
    /// Offer TLS (NBD's STARTTLS) with this X.509 certificate chain (PEM);
    /// needs --tls-key.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Accept only clients presenting a certificate signed by this CA (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Refuse clients that do not upgrade to TLS.
    #[arg(long, requires = "tls_cert")]
    pub tls_require: bool,
    /// Connections served at once, all exports together; more are closed.
    #[arg(long, default_value_t = 64)]
    pub max_connections: usize,
    /// Request buffers one connection may hold; the server stops reading a
    /// connection while it holds this much (at least 32M, the largest request).
    #[arg(long, default_value = "64M", value_parser = size)]
    pub max_inflight: u64,
    /// Requests of one connection served in parallel (threads start as
    /// requests need them, up to this many).
    #[arg(long, default_value_t = 32)]
    pub workers: usize,
    /// Send every read reply through a buffer. By default, reads of 32 KiB and
    /// more on plain (non-TLS) sockets go from the files holding the data to the
    /// socket by splice, without that copy, wherever the data is simply stored
    /// (plain files, arrays with every member needed present); this flag is
    /// for comparing the two.
    #[arg(long)]
    pub copy_reads: bool,
    #[command(flatten)]
    pub metrics: crate::metrics::MetricsArgs,
    /// Serve a live status page on this HTTP address (`PORT` alone listens on
    /// 127.0.0.1:PORT): arrays, caches, progress, per-member I/O, events.
    /// Read-only unless --http-token; a non-loopback address needs
    /// --http-allow-remote (the page is plain HTTP, no TLS).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// Allow management on the page (fail a member, add a spare, start a
    /// check) to requests that carry this token.
    #[arg(
        long,
        value_name = "TOKEN",
        requires = "http",
        conflicts_with = "http_token_file"
    )]
    pub http_token: Option<String>,
    /// The same, read from the first line of a file (keeps it out of `ps`).
    #[arg(long, value_name = "FILE", requires = "http")]
    pub http_token_file: Option<PathBuf>,
    /// Listen on a non-loopback --http address: the page and its token then
    /// cross the network in clear.
    #[arg(long, requires = "http")]
    pub http_allow_remote: bool,
}
