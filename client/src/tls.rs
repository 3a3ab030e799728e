//! TLS for `https://` servers: rustls with its `ring` provider, the server's certificate checked
//! by the platform's verifier against the operating system's trust roots, plus the CA
//! certificates given to [`HttpBuilder::ca_certificate`](super::HttpBuilder::ca_certificate).
//!
//! The configuration is built here and handed to reqwest whole, so the client never depends on
//! a process-wide default crypto provider being installed (or on one being absent).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use turnwise_core::protocol::error::{Error, Result};

/// The parameter named by a CA certificate's errors.
const PARAM: &str = "ca_certificate";

/// The certificates of one PEM document given to `ca_certificate`: every `CERTIFICATE`
/// section, at least one, each readable as an X.509 certificate. `index` numbers the document
/// among those given (from 1), for the error message.
pub(super) fn parse_ca_pem(pem: &[u8], index: usize) -> Result<Vec<CertificateDer<'static>>> {
    let which = format!("CA certificate PEM #{index}");
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, pem::Error>>()
        .map_err(|e| Error::invalid(PARAM, format!("{which} is not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(Error::invalid(
            PARAM,
            format!(
                "{which} holds no certificate: expected at least one \
                 `-----BEGIN CERTIFICATE-----` section"
            ),
        ));
    }
    // Read each one as a trust anchor now, so a damaged certificate is reported here and not
    // as a failed handshake later.
    let mut check = RootCertStore::empty();
    for (n, cert) in certs.iter().enumerate() {
        check.add(cert.clone()).map_err(|e| {
            Error::invalid(
                PARAM,
                format!(
                    "certificate {} of {which} cannot be read as an X.509 certificate: {e}",
                    n + 1
                ),
            )
        })?;
    }
    Ok(certs)
}

/// The rustls client configuration: the platform's trust roots plus `extra`, HTTP/1.1 only.
///
/// Without any trust root (a system without a CA store, and no `extra`) a client of an
/// `https://` server cannot be built; one of an `http://` server still can, with a verifier
/// that trusts nothing, so that only a redirect to an `https://` URL fails.
pub(super) fn client_config(
    extra: Vec<CertificateDer<'static>>,
    https: bool,
) -> Result<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::transport_caused("cannot set up TLS", e))?;
    let mut config =
        match rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider.clone()) {
            Ok(verifier) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth(),
            Err(e) if https => {
                return Err(Error::transport(format!(
                    "cannot set up TLS: no trusted CA certificate could be loaded ({e}); install \
                 the system's CA certificates (or point SSL_CERT_FILE at a bundle), or give \
                 the server's CA with HttpBuilder::ca_certificate"
                )))
            }
            // Without a system store the extra roots alone would have made the verifier above.
            Err(_) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(TrustsNothing(provider)))
                .with_no_client_auth(),
        };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The verifier of a client without any trust root: it refuses every server certificate,
/// saying why. Only reached when an `http://` server redirects to an `https://` URL.
#[derive(Debug)]
struct TrustsNothing(Arc<CryptoProvider>);

impl ServerCertVerifier for TrustsNothing {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Err(rustls::Error::General(
            "no trusted CA certificate was loaded when this client was built: install the \
             system's CA certificates, or give the server's CA with HttpBuilder::ca_certificate"
                .into(),
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
