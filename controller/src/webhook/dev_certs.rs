//! Certificates for development and tests ([`DevCertificates`]): a fresh
//! CA and a serving certificate it signs for the names an API server
//! dials (`<service>.<namespace>.svc`, `localhost`, `127.0.0.1`),
//! written where the webhook server reads them (`tls.crt`, `tls.key`, and
//! the CA as `ca.crt`); and [`patch_ca_bundle`], which puts the CA into
//! webhook configurations and CRD conversion webhooks (what cert-manager's
//! CA injector does on a cluster).

use std::path::Path;

use base64::Engine;
use kcontrol_client::{Api, Client, Error as ClientError, Patch, PatchParams};
use kcontrol_indexer::k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kcontrol_indexer::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kcontrol_indexer::KubeResource;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use super::certs::CertError;

/// A development CA and a serving certificate signed by it (PEM). Not for
/// production: the CA key is thrown away, and nothing rotates them.
#[derive(Clone)]
pub struct DevCertificates {
    /// The CA certificate (what `caBundle` must hold).
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// The serving key (never logged; `Debug` hides it).
    pub key_pem: String,
}

impl std::fmt::Debug for DevCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevCertificates")
            .field("ca_pem", &self.ca_pem)
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

fn gen_err(e: impl std::fmt::Display) -> CertError {
    CertError::Generate(e.to_string())
}

impl DevCertificates {
    /// A CA and a certificate for `hosts` (DNS names, or IP addresses).
    ///
    /// # Errors
    /// When a host is not a valid name.
    pub fn generate<S: AsRef<str>>(hosts: &[S]) -> Result<Self, CertError> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(gen_err)?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "kcontrol-webhook-dev-ca");
        ca_params.distinguished_name = dn;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(gen_err)?)
            .map_err(gen_err)?;
        let names: Vec<String> = hosts.iter().map(|h| h.as_ref().to_owned()).collect();
        let mut params = CertificateParams::new(names.clone()).map_err(gen_err)?;
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            names.first().map_or("kcontrol-webhook", String::as_str),
        );
        params.distinguished_name = dn;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().map_err(gen_err)?;
        let cert = params.signed_by(&key, &ca).map_err(gen_err)?;
        Ok(Self {
            ca_pem: ca.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A CA and a certificate for the Service `name` in `namespace` (the
    /// names kube-apiserver verifies: `name.namespace.svc`, and the longer
    /// and shorter forms), `localhost` and `127.0.0.1`.
    ///
    /// # Errors
    /// As [`DevCertificates::generate`].
    pub fn for_service(namespace: &str, name: &str) -> Result<Self, CertError> {
        Self::generate(&[
            format!("{name}.{namespace}.svc"),
            format!("{name}.{namespace}.svc.cluster.local"),
            format!("{name}.{namespace}"),
            name.to_owned(),
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
        ])
    }

    /// `caBundle`'s value: the CA certificate, base64.
    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// Writes `tls.crt`, `tls.key` (mode 0600 on Unix) and `ca.crt` into
    /// `dir` (created if missing), where [`CertWatcher::from_dir`](super::CertWatcher::from_dir)
    /// reads them. The key is written before the certificate is replaced,
    /// each file through a rename, so a watcher polling meanwhile sees
    /// either the old pair, a pair that does not fit yet (kept out), or
    /// the new pair.
    ///
    /// # Errors
    /// When a file cannot be written.
    pub fn write_to(&self, dir: impl AsRef<Path>) -> Result<(), CertError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| CertError::Write {
            path: dir.to_owned(),
            source,
        })?;
        write_atomically(&dir.join("ca.crt"), self.ca_pem.as_bytes(), false)?;
        write_atomically(&dir.join("tls.key"), self.key_pem.as_bytes(), true)?;
        write_atomically(&dir.join("tls.crt"), self.cert_pem.as_bytes(), false)
    }
}

fn write_atomically(path: &Path, bytes: &[u8], secret: bool) -> Result<(), CertError> {
    let err = |source| CertError::Write {
        path: path.to_owned(),
        source,
    };
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(err)?;
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    }
    #[cfg(not(unix))]
    let _ = secret;
    std::fs::rename(&tmp, path).map_err(err)
}

/// A JSON patch setting `caBundle` on every webhook of a configuration, or
/// on a CRD's conversion webhook, guarded by a `test` of the
/// resourceVersion read (a concurrent change fails with 409).
fn bundle_patch(object: &Value, ca_bundle: &str) -> Vec<Value> {
    let rv = object["metadata"]["resourceVersion"].clone();
    let mut ops = vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv})];
    if let Some(hooks) = object["webhooks"].as_array() {
        for i in 0..hooks.len() {
            ops.push(json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": ca_bundle}));
        }
    }
    if object["spec"]["conversion"]["webhook"]["clientConfig"].is_object() {
        ops.push(json!({"op": "add", "path": "/spec/conversion/webhook/clientConfig/caBundle", "value": ca_bundle}));
    }
    ops
}

async fn patch_one<K>(client: &Client, name: &str, ca_bundle: &str) -> Result<(), ClientError>
where
    K: KubeResource + Serialize + DeserializeOwned,
{
    let api: Api<K> = Api::all(client.clone());
    let object = serde_json::to_value(api.get(name).await?).unwrap_or_default();
    let ops = bundle_patch(&object, ca_bundle);
    api.patch(name, &PatchParams::default(), &Patch::Json(ops))
        .await
        .map(|_| ())
}

/// Sets `caBundle` (the CA certificate PEM, base64-encoded by the API) on
/// every webhook of the named `MutatingWebhookConfiguration`s and
/// `ValidatingWebhookConfiguration`s, and on the conversion webhook of the
/// named CRDs.
///
/// # Errors
/// The first failed read or write (a concurrent change gives 409).
pub async fn patch_ca_bundle(
    client: &Client,
    ca_pem: &str,
    mutating: &[&str],
    validating: &[&str],
    crds: &[&str],
) -> Result<(), ClientError> {
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    for name in mutating {
        patch_one::<MutatingWebhookConfiguration>(client, name, &bundle).await?;
    }
    for name in validating {
        patch_one::<ValidatingWebhookConfiguration>(client, name, &bundle).await?;
    }
    for name in crds {
        patch_one::<CustomResourceDefinition>(client, name, &bundle).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundle_goes_to_every_webhook_behind_a_resource_version_test() {
        let object = json!({"metadata": {"resourceVersion": "7"}, "webhooks": [{"name": "a"}, {"name": "b"}]});
        let ops = bundle_patch(&object, "Q0E=");
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[0]["op"], "test");
        assert_eq!(ops[2]["path"], "/webhooks/1/clientConfig/caBundle");
    }

    #[test]
    fn certificates_load_and_debug_hides_the_key() {
        let certs =
            DevCertificates::for_service("system", "webhook").unwrap_or_else(|e| panic!("{e}"));
        assert!(!format!("{certs:?}").contains("PRIVATE KEY"));
        let dir = std::env::temp_dir().join(format!("kcontrol-devcerts-{}", std::process::id()));
        certs.write_to(&dir).unwrap_or_else(|e| panic!("{e}"));
        let watcher = super::super::CertWatcher::from_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(watcher.loads(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
