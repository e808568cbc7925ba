//! The rustls side: which authorities are trusted (the `sslrootcert` file or
//! the webpki roots), and one certificate verifier per [`Verification`]. The
//! handshake's own signatures are always checked; what a mode relaxes is only
//! what the certificate must prove.

use crate::url::Verification;
use crate::Error;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, WebPkiServerVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// Largest `sslrootcert` file read (a whole system bundle is a few hundred KiB).
pub const ROOT_CERT_BYTES_MAX: u64 = 1 << 20;

/// The connector for `verification`, trusting `root_cert` (a PEM file) or,
/// absent, the webpki roots.
pub(crate) fn connector(verification: Verification, root_cert: Option<&Path>) -> Result<MakeRustlsConnect, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match verification {
        Verification::None => Arc::new(Relaxed { roots: None, provider: provider.clone() }),
        Verification::Chain => {
            Arc::new(Relaxed { roots: Some(Arc::new(roots(root_cert)?)), provider: provider.clone() })
        }
        Verification::ChainAndName => {
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots(root_cert)?), provider.clone())
                .build()
                .map_err(|e| Error::Tls(format!("certificate verifier: {e}")))?
        }
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(format!("TLS versions: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// The trusted authorities: every certificate in `path`, or the webpki roots.
fn roots(path: Option<&Path>) -> Result<RootCertStore, Error> {
    let Some(path) = path else {
        return Ok(RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() });
    };
    let refuse = |reason: String| Error::RootCert { path: path.to_path_buf(), reason };
    let mut pem = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(ROOT_CERT_BYTES_MAX + 1).read_to_end(&mut pem))
        .map_err(|e| refuse(e.to_string()))?;
    if pem.len() as u64 > ROOT_CERT_BYTES_MAX {
        return Err(refuse(format!("larger than {ROOT_CERT_BYTES_MAX} bytes")));
    }
    let mut store = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| refuse(format!("not PEM certificates: {e}")))?;
        store.add(cert).map_err(|e| refuse(format!("unusable certificate: {e}")))?;
    }
    if store.is_empty() {
        return Err(refuse("holds no certificate".into()));
    }
    Ok(store)
}

/// The verifier of the modes weaker than `verify-full`: with `roots`, the
/// chain up to one of them but not the name (`verify-ca`, or `require` with
/// `sslrootcert`); without, any certificate (`prefer`, `require`), as libpq.
#[derive(Debug)]
struct Relaxed {
    roots: Option<Arc<RootCertStore>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Relaxed {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let cert = ParsedCertificate::try_from(end_entity)?;
            let algorithms = self.provider.signature_verification_algorithms.all;
            verify_server_cert_signed_by_trust_anchor(&cert, roots, intermediates, now, algorithms)?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}
