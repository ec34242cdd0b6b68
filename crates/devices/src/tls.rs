//! A source's credentials – an MQTT password, the TLS certificate authority to trust, a
//! client certificate and its key – and the one TLS client configuration every TLS source
//! (MQTT subscriber and publisher, TCP) is built from.
//!
//! Credentials never come from the project: the caller looks them up in the secret store
//! and hands them in ([`crate::connect::Secrets`]). Their `Debug` output names which are
//! present, never a value.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};

use crate::source::DeviceError;

/// What a source may need to sign in and to check (and be checked by) its peer.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The MQTT password (the user name is in the project).
    pub password: Option<String>,
    /// PEM certificates of the authority to trust instead of the system's roots.
    pub ca_pem: Option<String>,
    /// PEM client certificate (chain) to present; needs [`Credentials::client_key_pem`].
    pub client_cert_pem: Option<String>,
    /// PEM private key of the client certificate.
    pub client_key_pem: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("password", &self.password.is_some())
            .field("ca_pem", &self.ca_pem.is_some())
            .field("client_cert_pem", &self.client_cert_pem.is_some())
            .field("client_key_pem", &self.client_key_pem.is_some())
            .finish()
    }
}

impl Credentials {
    /// Whether any TLS material is present (a password alone is not).
    pub fn has_tls_material(&self) -> bool {
        self.ca_pem.is_some() || self.client_cert_pem.is_some() || self.client_key_pem.is_some()
    }
}

/// Checks that `pem` holds at least one certificate; says what is wrong in words a person
/// who picked the wrong file understands.
pub fn check_certificates(pem: &str, what: &str) -> Result<(), String> {
    let certs = certificates(pem.as_bytes()).map_err(|e| format!("{what}: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "{what}: the file holds no certificate (expected PEM text starting with \
             `-----BEGIN CERTIFICATE-----`)"
        ));
    }
    Ok(())
}

/// Checks that `pem` holds a private key (PKCS#8, PKCS#1 or SEC1, unencrypted).
pub fn check_private_key(pem: &str) -> Result<(), String> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes())
        .map(|_| ())
        .map_err(|_| {
            "the client key: the file holds no unencrypted private key (expected PEM text \
             starting with `-----BEGIN PRIVATE KEY-----`, `…RSA PRIVATE KEY…` or `…EC PRIVATE \
             KEY…`; an encrypted key must be decrypted first, e.g. with `openssl pkey`)"
                .to_string()
        })
}

fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not a readable PEM file ({e})"))
}

/// The rustls client configuration for `credentials`: the given CA, else the CA file the
/// project names (`ca_file`, a path – public), else the system's roots; the client
/// certificate when one is given. Errors are fatal: retrying cannot fix a bad file.
pub fn client_config(
    credentials: &Credentials,
    ca_file: Option<&str>,
) -> Result<Arc<ClientConfig>, DeviceError> {
    let mut roots = RootCertStore::empty();
    let ca_pem =
        match (&credentials.ca_pem, ca_file) {
            (Some(pem), _) => Some(pem.clone().into_bytes()),
            (None, Some(path)) => Some(std::fs::read(path).map_err(|e| {
                DeviceError::fatal(format!("could not read the CA file {path}: {e}"))
            })?),
            (None, None) => None,
        };
    match ca_pem {
        Some(pem) => {
            let certs = certificates(&pem)
                .map_err(|e| DeviceError::fatal(format!("the CA certificate: {e}")))?;
            if certs.is_empty() {
                return Err(DeviceError::fatal(
                    "the CA certificate file holds no certificate",
                ));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| {
                    DeviceError::fatal(format!("the CA certificate cannot be used: {e}"))
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // One unusable system certificate must not cost the others.
                let _ = roots.add(cert);
            }
            if roots.is_empty() {
                return Err(DeviceError::fatal(
                    "no trusted certificate authorities were found on this system; give \
                     the broker's or device's CA certificate in the connection settings",
                ));
            }
        }
    }
    // Named provider: rustls cannot pick one by itself once two crates enable different
    // backends (ring for the HTTP clients, aws-lc through rumqttc). Installed process-wide
    // too, for code that builds its TLS from the default (already installed is fine).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| DeviceError::fatal(format!("TLS setup failed: {e}")))?
            .with_root_certificates(roots);
    let config = match (&credentials.client_cert_pem, &credentials.client_key_pem) {
        (Some(cert), Some(key)) => {
            let chain = certificates(cert.as_bytes())
                .map_err(|e| DeviceError::fatal(format!("the client certificate: {e}")))?;
            if chain.is_empty() {
                return Err(DeviceError::fatal(
                    "the client certificate file holds no certificate",
                ));
            }
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes())
                .map_err(|_| DeviceError::fatal(check_private_key(key).unwrap_err()))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                let text = e.to_string();
                DeviceError::fatal(if text.contains("UnsupportedCertVersion") {
                    "the client certificate is an X.509 version 1 certificate, which TLS no \
                     longer accepts; have it issued again as version 3 (with openssl: \
                     `openssl x509 -req … -extfile` naming `extendedKeyUsage=clientAuth`)"
                        .to_string()
                } else {
                    format!("the client certificate and key do not go together: {text}")
                })
            })?
        }
        (Some(_), None) => {
            return Err(DeviceError::fatal(
                "a client certificate needs its private key too; add the key in the \
                 connection settings",
            ))
        }
        (None, Some(_)) => {
            return Err(DeviceError::fatal(
                "a client key needs its certificate too; add the certificate in the \
                 connection settings",
            ))
        }
        (None, None) => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// The name the peer's certificate must carry: `host` as a DNS name or an IP address.
pub fn server_name(host: &str) -> Result<ServerName<'static>, DeviceError> {
    ServerName::try_from(host.to_string())
        .map_err(|_| DeviceError::fatal(format!("`{host}` is not a host name TLS can check")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_names_no_value() {
        let c = Credentials {
            password: Some("hunter2".into()),
            ..Credentials::default()
        };
        let shown = format!("{c:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("password: true"), "{shown}");
    }

    #[test]
    fn wrong_files_are_named() {
        assert!(check_certificates("hello", "the CA certificate")
            .unwrap_err()
            .contains("no certificate"));
        assert!(check_private_key(
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
        )
        .unwrap_err()
        .contains("no unencrypted private key"));
        let half = Credentials {
            client_cert_pem: Some("x".into()),
            ca_pem: Some(String::new()),
            ..Credentials::default()
        };
        assert!(client_config(&half, None).is_err());
    }
}
