//! TLS to PostgreSQL with rustls (the ring provider; no OpenSSL), as libpq's `sslmode`
//! asks: `verify-full` checks the server's certificate chain against `sslrootcert` and
//! its name against the host; `verify-ca` the chain only; `require` with `sslrootcert`
//! the chain, without it nothing (encrypted, the server not authenticated); `prefer`
//! encrypts when the server offers TLS and checks nothing, as libpq's.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::config::{SslMode, Tls};

/// What of the server's certificate is checked.
#[derive(Debug)]
struct Verifier {
    /// The chain's check against the trusted CAs; `None`: nothing is checked.
    chain: Option<Arc<WebPkiServerVerifier>>,
    /// Whether the certificate must name the host.
    name: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The connector for `tls`; an unreadable or empty `sslrootcert` is an error that names
/// the file.
pub(super) fn connector(tls: &Tls) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = match &tls.root_cert {
        Some(path) if tls.mode != SslMode::Prefer => {
            let shown = path.display();
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("sslrootcert `{shown}`: cannot read it: {e}"))?;
            for cert in certs {
                let cert = cert.map_err(|e| format!("sslrootcert `{shown}`: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("sslrootcert `{shown}`: {e}"))?;
            }
            if roots.is_empty() {
                return Err(format!("sslrootcert `{shown}` holds no certificate"));
            }
            let verifier =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                    .build()
                    .map_err(|e| format!("sslrootcert `{shown}`: {e}"))?;
            Some(verifier)
        }
        _ => None,
    };
    let verifier = Verifier {
        chain,
        name: tls.mode == SslMode::VerifyFull,
        algorithms: provider.signature_verification_algorithms,
    };
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::clone(&provider) as Arc<CryptoProvider>)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}
