//! Reading a database URL: the libpq TLS parameters tokio-postgres does not
//! know (`sslmode`'s `verify-ca` and `verify-full`, `sslrootcert`) are taken
//! out, and the rest is handed to `tokio_postgres::Config` unchanged. Both of
//! libpq's forms are read: `postgres://user@host/db?sslmode=…` and
//! `host=… sslmode=…`.

use crate::Error;
use percent_encoding::percent_decode_str;
use std::path::PathBuf;
use std::str::FromStr;

/// The `sslmode` parameter this crate reads itself.
const SSLMODE_KEY: &str = "sslmode";
/// The `sslrootcert` parameter: a PEM file of the certificate authorities to trust.
const SSLROOTCERT_KEY: &str = "sslrootcert";
/// The schemes of the URL form.
const URL_SCHEMES: [&str; 2] = ["postgres://", "postgresql://"];

/// libpq's `sslmode`, as this crate carries it out. Absent means
/// [`SslMode::Disable`] (libpq's default is `prefer`; ours is plain unless asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS if the server offers it, without verification; plain otherwise.
    Prefer,
    /// TLS or no connection. No certificate verification, unless
    /// `sslrootcert` is given: then the chain is verified (libpq's rule).
    Require,
    /// TLS, the server's chain verified; any host name.
    VerifyCa,
    /// TLS, the server's chain and its host name verified.
    VerifyFull,
}

impl SslMode {
    /// Every mode, in libpq's order from weakest to strongest.
    pub const ALL: [SslMode; 5] =
        [SslMode::Disable, SslMode::Prefer, SslMode::Require, SslMode::VerifyCa, SslMode::VerifyFull];

    /// The value as written in a URL.
    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

impl FromStr for SslMode {
    type Err = Error;

    fn from_str(value: &str) -> Result<SslMode, Error> {
        SslMode::ALL.into_iter().find(|mode| mode.name() == value).ok_or_else(|| {
            let supported: Vec<&str> = SslMode::ALL.iter().map(|mode| mode.name()).collect();
            Error::Url(format!("sslmode {value:?} is not one of {}", supported.join(", ")))
        })
    }
}

/// How much of the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verification {
    /// Nothing: the connection is encrypted, not authenticated.
    None,
    /// The chain up to a trusted authority.
    Chain,
    /// The chain and the host name.
    ChainAndName,
}

/// A database URL read: the driver's settings (TLS decided by `ssl_mode`,
/// which this sets on `config` as `disable`, `prefer` or `require`) and the
/// TLS parameters tokio-postgres does not read.
#[derive(Debug, Clone)]
pub struct ParsedUrl {
    pub config: tokio_postgres::Config,
    pub ssl_mode: SslMode,
    /// `sslrootcert`: a PEM file of the authorities to trust instead of the
    /// webpki (Mozilla) roots.
    pub root_cert: Option<PathBuf>,
}

impl ParsedUrl {
    /// What the server's certificate must prove for this mode.
    pub fn verification(&self) -> Verification {
        match self.ssl_mode {
            SslMode::Disable | SslMode::Prefer => Verification::None,
            SslMode::Require if self.root_cert.is_none() => Verification::None,
            SslMode::Require | SslMode::VerifyCa => Verification::Chain,
            SslMode::VerifyFull => Verification::ChainAndName,
        }
    }
}

/// Reads `url` (URL or key=value form). Fails on an unknown `sslmode` or
/// anything tokio-postgres refuses, saying which.
pub fn parse_url(url: &str) -> Result<ParsedUrl, Error> {
    let (rest, tls) = match URL_SCHEMES.iter().any(|scheme| url.starts_with(scheme)) {
        true => split_url(url),
        false => split_key_value(url)?,
    };
    let mut config: tokio_postgres::Config =
        rest.parse().map_err(|e: tokio_postgres::Error| Error::Url(crate::chain(&e)))?;
    let ssl_mode = match tls.ssl_mode {
        Some(value) => value.parse()?,
        None => SslMode::Disable,
    };
    config.ssl_mode(match ssl_mode {
        SslMode::Disable => tokio_postgres::config::SslMode::Disable,
        SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => tokio_postgres::config::SslMode::Require,
    });
    Ok(ParsedUrl { config, ssl_mode, root_cert: tls.root_cert.map(PathBuf::from) })
}

/// The TLS parameters taken out of a URL (the last of each wins, as in libpq).
#[derive(Default)]
struct TlsParams {
    ssl_mode: Option<String>,
    root_cert: Option<String>,
}

impl TlsParams {
    /// Keeps `value` if `key` is one of ours; says whether it was.
    fn take(&mut self, key: &str, value: String) -> bool {
        match key {
            SSLMODE_KEY => self.ssl_mode = Some(value),
            SSLROOTCERT_KEY => self.root_cert = Some(value),
            _ => return false,
        }
        true
    }
}

/// The URL form: our parameters out of the query string, the others kept
/// byte for byte.
fn split_url(url: &str) -> (String, TlsParams) {
    let mut tls = TlsParams::default();
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), tls);
    };
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode_str(value).decode_utf8_lossy().into_owned();
        if !tls.take(&percent_decode_str(key).decode_utf8_lossy(), value) {
            kept.push(pair);
        }
    }
    let rest = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    (rest, tls)
}

/// The key=value form: `key = value` pairs apart by white space, a value
/// either bare or in single quotes, `\` escaping the next character.
fn split_key_value(text: &str) -> Result<(String, TlsParams), Error> {
    let mut tls = TlsParams::default();
    let mut kept = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let start = rest;
        let key_end = rest.find(|c: char| c == '=' || c.is_whitespace()).unwrap_or(rest.len());
        let key = &rest[..key_end];
        rest = rest[key_end..].trim_start();
        let Some(after_equals) = rest.strip_prefix('=') else {
            return Err(Error::Url(format!("expected `=` after {key:?} in the connection string")));
        };
        let (value, after_value) = conninfo_value(after_equals.trim_start())?;
        let pair = &start[..start.len() - after_value.len()];
        if !tls.take(key, value) {
            kept.push(pair);
        }
        rest = after_value.trim_start();
    }
    Ok((kept.join(" "), tls))
}

/// One value of the key=value form and what follows it.
fn conninfo_value(text: &str) -> Result<(String, &str), Error> {
    let quoted = text.starts_with('\'');
    let mut value = String::new();
    let mut chars = text.char_indices().skip(usize::from(quoted));
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, escaped)) => value.push(escaped),
                None => return Err(Error::Url("connection string ends in `\\`".into())),
            },
            '\'' if quoted => return Ok((value, &text[at + 1..])),
            c if c.is_whitespace() && !quoted => return Ok((value, &text[at..])),
            c => value.push(c),
        }
    }
    match quoted {
        true => Err(Error::Url("unterminated quoted value in the connection string".into())),
        false => Ok((value, "")),
    }
}
