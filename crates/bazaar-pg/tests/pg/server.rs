//! A throwaway PostgreSQL 15 server in a temporary folder, on a free
//! 127.0.0.1 port: with `ssl=on` and a certificate authority and a server
//! certificate (for `localhost` and `127.0.0.1`) made for it, or with TLS
//! off. PostgreSQL refuses to run as root, so as root it runs as the
//! `postgres` user.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where Debian's `postgresql` package puts PostgreSQL 15's server programs.
const DEFAULT_BIN: &str = "/usr/lib/postgresql/15/bin";
/// The account the server runs as when the test runs as root.
const SERVER_USER: &str = "postgres";

static NEXT_SERVER: AtomicU64 = AtomicU64::new(0);

/// A certificate authority: its PEM and the key that signs with it.
pub struct Authority {
    pub cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl Authority {
    pub fn new(name: &str) -> Authority {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
        Authority { cert: params.self_signed(&key).unwrap(), key }
    }

    /// A server certificate for `names` and its private key, both PEM.
    fn issue(&self, names: &[&str]) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = rcgen::CertificateParams::new(names).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "bazaar test server");
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// A running server; stopped and its folder removed when dropped.
pub struct Server {
    pub port: u16,
    /// The PEM file of the authority that signed the server's certificate.
    pub ca_file: PathBuf,
    dir: PathBuf,
    bin: PathBuf,
}

impl Server {
    /// Starts one with TLS on.
    pub fn start_tls() -> Server {
        Server::start(true)
    }

    /// Starts one with TLS off, as a server that never offers it.
    pub fn start_plain() -> Server {
        Server::start(false)
    }

    /// Starts one. Panics, saying what is missing, if PostgreSQL 15 is not
    /// installed (`BAZAAR_TEST_PG_BIN` names another folder of its programs).
    fn start(ssl: bool) -> Server {
        let bin = std::env::var("BAZAAR_TEST_PG_BIN").map(PathBuf::from).unwrap_or_else(|_| DEFAULT_BIN.into());
        assert!(
            bin.join("initdb").is_file() && bin.join("pg_ctl").is_file(),
            "the TLS tests need PostgreSQL 15's initdb and pg_ctl in {} (Debian's `postgresql` package, which \
             scripts/test installs; or set BAZAAR_TEST_PG_BIN)",
            bin.display()
        );
        let n = NEXT_SERVER.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("bazaar-pg-tls-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let authority = Authority::new("bazaar test CA");
        let (cert, key) = authority.issue(&["localhost", "127.0.0.1"]);
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, authority.cert.pem()).unwrap();
        std::fs::write(dir.join("server.crt"), cert).unwrap();
        std::fs::write(dir.join("server.key"), key).unwrap();
        let server = Server { port: free_port(), ca_file, dir, bin };
        if as_root() {
            run(Command::new("chown").arg("-R").arg(format!("{SERVER_USER}:")).arg(&server.dir));
        }
        // PostgreSQL refuses a key file others can read.
        run(Command::new("chmod").arg("600").arg(server.dir.join("server.key")));
        let data = server.dir.join("data");
        server.run_pg("initdb", &["-D", path(&data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]);
        let options = format!(
            "-c listen_addresses=127.0.0.1 -c port={} -c unix_socket_directories={dir} -c fsync=off \
             -c ssl={} -c ssl_cert_file={dir}/server.crt -c ssl_key_file={dir}/server.key",
            server.port,
            if ssl { "on" } else { "off" },
            dir = path(&server.dir),
        );
        let log = server.dir.join("server.log");
        server.run_pg("pg_ctl", &["-D", path(&data), "-l", path(&log), "-w", "-o", &options, "start"]);
        server
    }

    /// A URL of this server's `postgres` database as `host`, with `params` (`a=b&c=d`).
    pub fn url(&self, host: &str, params: &str) -> String {
        format!("postgres://postgres@{host}:{}/postgres?{params}", self.port)
    }

    /// Runs one of PostgreSQL's programs, as the server's user when root.
    fn run_pg(&self, program: &str, args: &[&str]) {
        let program = self.bin.join(program);
        let mut command = match as_root() {
            true => {
                let mut c = Command::new("runuser");
                c.args(["-u", SERVER_USER, "--"]).arg(&program);
                c
            }
            false => Command::new(&program),
        };
        // The server's user may not be able to enter the test's folder.
        command.args(args).current_dir(&self.dir);
        let output = command.output().unwrap_or_else(|e| panic!("{}: {e}", program.display()));
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        assert!(
            output.status.success(),
            "{} failed: {}{}\nserver log:\n{log}",
            program.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        // Not `run_pg`: a panic while unwinding would abort the test binary.
        let stopped =
            std::panic::catch_unwind(|| self.run_pg("pg_ctl", &["-D", path(&data), "-m", "immediate", "stop"]));
        if stopped.is_err() {
            eprintln!("could not stop the test server in {}", self.dir.display());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn path(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

fn run(command: &mut Command) {
    let status = command.status().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(status.success(), "{command:?} failed");
}

/// Whether this process runs as root (`id -u` is 0).
fn as_root() -> bool {
    let output = Command::new("id").arg("-u").output().expect("id -u");
    String::from_utf8_lossy(&output.stdout).trim() == "0"
}

/// A port nothing listens on now (the OS's choice for port 0).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
