//! Reading database URLs: which TLS a URL asks for, what the driver is
//! handed, and the errors for what is not understood.

use bazaar_pg::{parse_url, Error, SslMode, Verification};
use std::path::Path;
use tokio_postgres::config::{Host, SslMode as DriverMode};

/// `url` read: its mode, its root file, the verification that follows, and
/// the driver's own TLS setting.
fn check(url: &str, mode: SslMode, root_cert: Option<&str>, verification: Verification) {
    let parsed = parse_url(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    assert_eq!(parsed.ssl_mode, mode, "{url}");
    assert_eq!(parsed.root_cert.as_deref(), root_cert.map(Path::new), "{url}");
    assert_eq!(parsed.verification(), verification, "{url}");
    let driver = match mode {
        SslMode::Disable => DriverMode::Disable,
        SslMode::Prefer => DriverMode::Prefer,
        _ => DriverMode::Require,
    };
    assert_eq!(parsed.config.get_ssl_mode(), driver, "{url}");
}

#[test]
fn each_mode_asks_for_its_verification() {
    use SslMode::*;
    use Verification::{Chain, ChainAndName, None as Unverified};
    let cases = [
        // Absent is disable, not libpq's prefer: a URL that says nothing stays plain.
        ("postgres://u@h/db", Disable, None, Unverified),
        ("postgres://u@h/db?sslmode=disable", Disable, None, Unverified),
        ("postgres://u@h/db?sslmode=prefer", Prefer, None, Unverified),
        ("postgres://u@h/db?sslmode=require", Require, None, Unverified),
        // libpq: require with a root file verifies the chain.
        ("postgres://u@h/db?sslmode=require&sslrootcert=/ca.pem", Require, Some("/ca.pem"), Chain),
        ("postgres://u@h/db?sslmode=verify-ca", VerifyCa, None, Chain),
        ("postgres://u@h/db?sslmode=verify-full", VerifyFull, None, ChainAndName),
        (
            "postgresql://u@h/db?sslrootcert=%2Fetc%2Fca%20x.pem&sslmode=verify-full",
            VerifyFull,
            Some("/etc/ca x.pem"),
            ChainAndName,
        ),
        // The last of each wins, as in libpq.
        ("postgres://u@h/db?sslmode=require&sslmode=disable", Disable, None, Unverified),
        ("host=h user=u sslmode=verify-full sslrootcert=/ca.pem", VerifyFull, Some("/ca.pem"), ChainAndName),
        ("host=h sslrootcert = '/my certs/ca.pem' sslmode=verify-ca", VerifyCa, Some("/my certs/ca.pem"), Chain),
        ("host=h sslrootcert=/a\\ b.pem", Disable, Some("/a b.pem"), Unverified),
        ("host=h user=u", Disable, None, Unverified),
    ];
    for (url, mode, root_cert, verification) in cases {
        check(url, mode, root_cert, verification);
    }
}

#[test]
fn the_driver_gets_everything_else_unchanged() {
    let parsed = parse_url(
        "postgres://alice:s%3Fcret@db.example:6543/ledger?sslmode=verify-full&application_name=x\
         &options=-c%20search_path%3Dcase_1&sslrootcert=/ca.pem&connect_timeout=7",
    )
    .unwrap();
    let config = parsed.config;
    assert_eq!(config.get_hosts(), [Host::Tcp("db.example".into())]);
    assert_eq!(config.get_ports(), [6543]);
    assert_eq!(config.get_user(), Some("alice"));
    assert_eq!(config.get_password(), Some(&b"s?cret"[..]));
    assert_eq!(config.get_dbname(), Some("ledger"));
    assert_eq!(config.get_application_name(), Some("x"));
    assert_eq!(config.get_options(), Some("-c search_path=case_1"));
    assert_eq!(config.get_connect_timeout(), Some(&std::time::Duration::from_secs(7)));

    let config = parse_url("host=h  dbname='my db'  sslmode=require port=7 user=u").unwrap().config;
    assert_eq!(config.get_dbname(), Some("my db"));
    assert_eq!(config.get_ports(), [7]);
    assert_eq!(config.get_user(), Some("u"));
}

#[test]
fn an_unknown_sslmode_names_the_supported_ones() {
    for url in ["postgres://u@h/db?sslmode=verify_full", "host=h sslmode=allowed"] {
        let error = parse_url(url).unwrap_err();
        assert!(matches!(error, Error::Url(_)), "{url}: {error:?}");
        let text = error.to_string();
        for mode in SslMode::ALL {
            assert!(text.contains(mode.name()), "{url}: {text} does not name {}", mode.name());
        }
    }
}

#[test]
fn what_the_driver_refuses_is_a_url_error() {
    let cases = [
        ("postgres://u@h/db?sslcert=/client.pem", "sslcert"),
        ("postgres://u@h:notaport/db", "invalid connection string"),
        ("host=h sslrootcert='/unterminated", "unterminated"),
        ("host=h sslmode", "expected `=`"),
    ];
    for (url, expected) in cases {
        let text = parse_url(url).unwrap_err().to_string();
        assert!(text.starts_with("database URL: ") && text.contains(expected), "{url}: {text}");
    }
}

#[test]
fn a_root_file_that_cannot_be_used_says_which_and_why() {
    let dir = std::env::temp_dir().join(format!("bazaar-pg-parse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "no certificates here\n").unwrap();
    let cases = [(dir.join("missing.pem"), "No such file"), (empty, "holds no certificate")];
    for (path, expected) in cases {
        let url = format!("postgres://u@h/db?sslmode=verify-full&sslrootcert={}", path.display());
        let error = bazaar_pg::Database::from_url(&url).err().expect("an unusable root file is refused");
        let text = error.to_string();
        assert!(text.contains(&path.display().to_string()) && text.contains(expected), "{text}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
