//! Every HTTP client cairn builds: reqwest on rustls over ring with the
//! webpki roots.
//!
//! reqwest 0.13's own rustls provider is aws-lc (a C build) and its roots
//! the system's; cairn keeps one TLS stack (ring, as sqlx and lettre use)
//! and the same roots on every machine, so reqwest is built without a
//! provider and each client is handed this configuration. A client built
//! any other way panics at `build()` unless a default provider was
//! installed, which the binary does as a safety net
//! ([`install_default_provider`]).

use std::sync::Arc;

/// A client builder with cairn's TLS; add the rest and `build()` it.
pub fn client_builder() -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder();
    match client_config() {
        Ok(tls) => builder.tls_backend_preconfigured(tls),
        // reqwest fails `build()` on a backend it does not know, so the
        // error reaches the caller where a client's errors already go.
        Err(e) => {
            tracing::error!(error = %e, "cannot set up TLS for an HTTP client");
            builder.tls_backend_preconfigured(())
        }
    }
}

/// A client with cairn's TLS and reqwest's defaults otherwise.
pub fn client() -> Result<reqwest::Client, reqwest::Error> {
    client_builder().build()
}

/// Makes ring the process's rustls provider, so that a client built
/// without [`client_builder`] gets ring too rather than a panic. Harmless
/// when one is already installed.
pub fn install_default_provider() {
    // Err only when a provider was installed first: that one stays.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The TLS of a WebSocket client (Slack's Socket Mode): the same provider
/// and roots as the HTTP clients, without ALPN (the upgrade is HTTP/1.1).
pub fn websocket_config() -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    let mut tls = client_config()?;
    tls.alpn_protocols.clear();
    Ok(Arc::new(tls))
}

fn client_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // reqwest offers nothing itself on a preconfigured backend; HTTP/2
    // first, as reqwest does on its own (LLM APIs stream over either).
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_build_without_a_default_provider() {
        // No provider is installed in this test binary: the client must
        // still build, on ring.
        assert!(rustls::crypto::CryptoProvider::get_default().is_none());
        client().expect("a client with cairn's TLS builds");
        let tls = client_config().expect("ring offers the safe default versions");
        assert_eq!(tls.alpn_protocols[0], b"h2");
    }
}
