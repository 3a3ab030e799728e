//! The `Http` backend over TLS: CA certificates given to the builder (read, refused with the
//! reason when they cannot be), and trusted in a real handshake with a local `https://` server.
//! The certificates are in `tests/data/` (see its README for how they were made).
#![cfg(feature = "http")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use turnwise::protocol::Lease;
use turnwise::{Backend, Error, Http};

const CA: &[u8] = include_bytes!("../data/test-ca.pem");
const SERVER_CERT: &[u8] = include_bytes!("../data/test-server.pem");
const SERVER_KEY: &[u8] = include_bytes!("../data/test-server.key");
/// A second CA, and a server certificate it signed.
const CA_2: &[u8] = include_bytes!("../data/test-ca-2.pem");
const SERVER_2_CERT: &[u8] = include_bytes!("../data/test-server-2.pem");
const SERVER_2_KEY: &[u8] = include_bytes!("../data/test-server-2.key");

/// The `Error::Invalid` message of a client built with these CA documents, or a panic naming
/// what was built instead.
fn refusal(pems: &[&[u8]]) -> String {
    let mut builder = Http::builder("https://127.0.0.1:1");
    for pem in pems {
        builder = builder.ca_certificate(pem.to_vec());
    }
    match builder.build() {
        Err(Error::Invalid { param, message }) => {
            assert_eq!(param, "ca_certificate", "{message}");
            message
        }
        Err(other) => panic!("expected Error::Invalid, got {other:?}"),
        Ok(_) => panic!("a client was built from a CA document that should be refused"),
    }
}

#[tokio::test]
async fn a_good_ca_pem_is_accepted() {
    for base in ["https://127.0.0.1:1", "http://127.0.0.1:1"] {
        Http::builder(base)
            .ca_certificate(CA)
            .build()
            .unwrap_or_else(|e| panic!("{base}: {e}"));
    }
    // A bundle of several certificates, with other sections between them: each one of them is
    // trusted, not only the first. The server's certificate was signed by the second CA.
    let mut bundle = CA.to_vec();
    bundle.extend_from_slice(SERVER_KEY);
    bundle.extend_from_slice(CA_2);
    let addr = tls_server(SERVER_2_CERT, SERVER_2_KEY, 1);
    let client = Http::builder(format!("https://{addr}"))
        .ca_certificate(bundle)
        .ca_certificate(CA)
        .max_retries(0)
        .build()
        .expect("a bundle of two certificates and a key, and another document");
    client
        .heartbeat(lease())
        .await
        .expect("the server's certificate verifies against the bundle's second CA");
}

#[test]
fn a_bad_ca_pem_is_refused_naming_the_problem() {
    // Not PEM at all, or only a key: no certificate.
    let message = refusal(&[b"this is not a certificate"]);
    assert!(message.contains("holds no certificate"), "{message}");
    let message = refusal(&[SERVER_KEY]);
    assert!(message.contains("holds no certificate"), "{message}");

    // A certificate section whose base64 is damaged.
    let message = refusal(&[b"-----BEGIN CERTIFICATE-----\nMIIB!!!!\n-----END CERTIFICATE-----\n"]);
    assert!(message.contains("is not valid PEM"), "{message}");

    // A section that never ends.
    let cut = &CA[..CA.len() / 2];
    let message = refusal(&[cut]);
    assert!(message.contains("is not valid PEM"), "{message}");

    // Valid PEM around bytes that are not a certificate.
    let message =
        refusal(&[b"-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n"]);
    assert!(
        message.contains("certificate 1 of CA certificate PEM #1 cannot be read as an X.509"),
        "{message}"
    );

    // The message says which document was wrong.
    let message = refusal(&[CA, b"nothing here"]);
    assert!(message.contains("PEM #2"), "{message}");
}

/// A TLS server on 127.0.0.1 with certificate `cert` and its `key`, answering `{}` to each of up
/// to `connections` requests, one per connection.
fn tls_server(cert: &[u8], key: &[u8], connections: usize) -> SocketAddr {
    let certs = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .expect("the test certificate");
    let key = PrivateKeyDer::from_pem_slice(key).expect("the test key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("the server's certificate and key");
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        for stream in listener.incoming().take(connections) {
            let Ok(stream) = stream else { continue };
            let Ok(conn) = rustls::ServerConnection::new(config.clone()) else {
                continue;
            };
            // A failed handshake (the client refusing the certificate) just ends this one.
            let _ = answer_one(rustls::StreamOwned::new(conn, stream));
        }
    });
    addr
}

/// Read one request (headers, then `content-length` bytes) and answer `200 {}`.
fn answer_one(mut tls: impl Read + Write) -> std::io::Result<()> {
    let mut request = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = tls.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        request.extend_from_slice(&chunk[..n]);
        if let Some(i) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&request[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while request.len() < head_end + length {
        let n = tls.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&chunk[..n]);
    }
    tls.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\
          connection: close\r\n\r\n{}",
    )?;
    tls.flush()
}

fn lease() -> Lease {
    Lease {
        workflow_id: "w".into(),
        turn: 1,
        token: "t".into(),
    }
}

#[tokio::test]
async fn the_given_ca_is_trusted_in_a_handshake_and_nothing_else_is() {
    let addr = tls_server(SERVER_CERT, SERVER_KEY, 2);
    let base = format!("https://{addr}");

    // With the CA, the server's certificate verifies and the call goes through (a heartbeat is
    // sent once and accepts any JSON answer).
    let trusting = Http::builder(&base)
        .ca_certificate(CA)
        .max_retries(0)
        .build()
        .expect("client with the CA");
    let turn = trusting
        .heartbeat(lease())
        .await
        .expect("the handshake succeeds with the CA trusted");
    assert_eq!((turn.workflow_id.as_str(), turn.number), ("w", 1));

    // Without it the certificate is not trusted (the system roots do not hold the test CA).
    // Where this machine has no CA store at all, an `https://` client is refused when built.
    let plain = match Http::builder(&base).max_retries(0).build() {
        Ok(client) => client,
        Err(Error::Transport { message, .. }) => {
            assert!(message.contains("no trusted CA certificate"), "{message}");
            return;
        }
        Err(other) => panic!("unexpected error building a plain https client: {other:?}"),
    };
    match plain.heartbeat(lease()).await {
        Err(Error::Transport { message, .. }) => assert!(
            message.to_ascii_lowercase().contains("certificate"),
            "the error should name the certificate: {message}"
        ),
        other => panic!("an untrusted certificate was accepted: {other:?}"),
    }
}
