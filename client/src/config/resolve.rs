//! Turns a [`Kubeconfig`] and the selected context into a [`Config`]:
//! look up the context, cluster and user; read CA, certificate and key
//! data or files; pick the credential (token > tokenFile > exec > basic);
//! and refuse what this client cannot honour (auth providers,
//! impersonation, proxies) rather than silently ignoring it.

use std::path::{Path, PathBuf};

use base64::Engine;
use secrecy::{ExposeSecret, SecretString};

use super::kubeconfig::{AuthInfo, Cluster, Context, Kubeconfig};
use super::{
    parse_pem_certs, parse_pem_key, ClientIdentity, Config, ConfigError, KubeconfigOptions,
    TlsConfig,
};
use crate::auth::{Auth, ExecConfig};

/// The cluster extension passed to exec plugins as `spec.cluster.config`.
const EXEC_EXTENSION: &str = "client.authentication.k8s.io/exec";

/// Names a field of a named kubeconfig entry, with the file it came from.
fn field(list: &str, name: &str, key: &str, source: Option<&Path>) -> String {
    let mut text = format!("{list}[{name}]");
    if !key.is_empty() {
        text.push('.');
        text.push_str(key);
    }
    if let Some(path) = source {
        text.push_str(&format!(" (in {})", path.display()));
    }
    text
}

fn invalid(field: String, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field,
        message: message.into(),
    }
}

fn files_of(kubeconfig: &Kubeconfig) -> String {
    if kubeconfig.files.is_empty() {
        "the kubeconfig".to_owned()
    } else {
        kubeconfig
            .files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

pub(super) fn resolve(
    kubeconfig: &Kubeconfig,
    options: &KubeconfigOptions,
) -> Result<Config, ConfigError> {
    let (context_name, context, source) = selected_context(kubeconfig, options)?;
    let (cluster_name, cluster, cluster_source) =
        selected_cluster(kubeconfig, options, &context_name, context, source)?;
    let at_cluster = |key: &str| field("clusters", &cluster_name, key, cluster_source);

    let mut config = Config::new(server_url(cluster, &at_cluster)?);
    if let Some(ns) = context.namespace.as_ref().filter(|n| !n.is_empty()) {
        config.default_namespace = ns.clone();
    }
    let ca_pem = ca_pem(cluster, &at_cluster)?;
    config.tls = cluster_tls(cluster, ca_pem.as_deref(), &at_cluster)?;

    let user_name = options
        .user
        .clone()
        .or_else(|| context.user.clone())
        .filter(|u| !u.is_empty());
    if let Some(user_name) = user_name {
        let named_user = kubeconfig
            .auth_infos
            .iter()
            .find(|u| u.name == user_name)
            .ok_or_else(|| {
                invalid(
                    field("users", &user_name, "", None),
                    format!(
                        "no such user in {} (used by context {context_name})",
                        files_of(kubeconfig)
                    ),
                )
            })?;
        let user_source = named_user.source.as_deref();
        let at_user = |key: &str| field("users", &user_name, key, user_source);
        if let Some(user) = &named_user.user {
            config.tls.client_identity = client_identity(user, &at_user)?;
            config.auth = user_auth(user, &at_user)?;
            if let Auth::Exec(exec) = &mut config.auth {
                exec.cluster = Some(exec_cluster_info(cluster, ca_pem.as_deref()));
            }
        }
    }
    Ok(config)
}

/// The context in use (`options.context`, else `current-context`): its
/// name, its body and the file it came from.
fn selected_context<'k>(
    kubeconfig: &'k Kubeconfig,
    options: &KubeconfigOptions,
) -> Result<(String, &'k Context, Option<&'k Path>), ConfigError> {
    let context_name = options
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone())
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            invalid(
                "current-context".to_owned(),
                format!(
                    "not set in {} and no context was given",
                    files_of(kubeconfig)
                ),
            )
        })?;
    let named = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .ok_or_else(|| {
            invalid(
                field("contexts", &context_name, "", None),
                format!("no such context in {}", files_of(kubeconfig)),
            )
        })?;
    let source = named.source.as_deref();
    let context = named.context.as_ref().ok_or_else(|| {
        invalid(
            field("contexts", &context_name, "context", source),
            "missing",
        )
    })?;
    Ok((context_name, context, source))
}

/// The cluster in use (`options.cluster`, else the context's): its name,
/// its body and the file it came from.
fn selected_cluster<'k>(
    kubeconfig: &'k Kubeconfig,
    options: &KubeconfigOptions,
    context_name: &str,
    context: &Context,
    source: Option<&Path>,
) -> Result<(String, &'k Cluster, Option<&'k Path>), ConfigError> {
    let cluster_name = options
        .cluster
        .clone()
        .unwrap_or_else(|| context.cluster.clone());
    if cluster_name.is_empty() {
        return Err(invalid(
            field("contexts", context_name, "cluster", source),
            "no cluster named",
        ));
    }
    let named_cluster = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .ok_or_else(|| {
            invalid(
                field("clusters", &cluster_name, "", None),
                format!(
                    "no such cluster in {} (used by context {context_name})",
                    files_of(kubeconfig)
                ),
            )
        })?;
    let cluster_source = named_cluster.source.as_deref();
    let cluster = named_cluster.cluster.as_ref().ok_or_else(|| {
        invalid(
            field("clusters", &cluster_name, "cluster", cluster_source),
            "missing",
        )
    })?;
    Ok((cluster_name, cluster, cluster_source))
}

fn server_url(cluster: &Cluster, at: &dyn Fn(&str) -> String) -> Result<http::Uri, ConfigError> {
    if cluster.proxy_url.as_ref().is_some_and(|p| !p.is_empty()) {
        return Err(invalid(
            at("proxy-url"),
            "proxies are not supported by kcontrol-client",
        ));
    }
    let server = cluster
        .server
        .as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| invalid(at("server"), "not set"))?;
    // `user:password@host`: refused without quoting the URL, which would
    // print the password (and the client would not use it anyway).
    let after_scheme = server.split_once("://").map_or(server, |(_, rest)| rest);
    let authority = after_scheme.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(invalid(
            at("server"),
            "the URL carries user information (user:password@); put credentials in the user entry",
        ));
    }
    let with_scheme = if server.contains("://") {
        server.to_owned()
    } else {
        format!("https://{server}")
    };
    let uri: http::Uri = with_scheme
        .parse()
        .map_err(|e| invalid(at("server"), format!("{server:?} is not a URL ({e})")))?;
    match uri.scheme_str() {
        Some("https" | "http") if uri.authority().is_some() => Ok(uri),
        _ => Err(invalid(
            at("server"),
            format!("{server:?} is not an http(s) URL with a host"),
        )),
    }
}

/// Decodes a base64 `*-data` field (whitespace ignored).
fn decode_base64(value: &str, field_name: String) -> Result<Vec<u8>, ConfigError> {
    let compact: String = value.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|e| invalid(field_name, format!("not valid base64 ({e})")))
}

fn read_file(path: &str, field_name: String) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|source| ConfigError::ReadFile {
        field: field_name,
        path: PathBuf::from(path),
        source,
    })
}

/// Data from `<key>-data` (base64) or, failing that, from the file `<key>`.
fn data_or_file(
    data: Option<&str>,
    file: Option<&str>,
    key: &str,
    at: &dyn Fn(&str) -> String,
) -> Result<Option<Vec<u8>>, ConfigError> {
    if let Some(data) = data.filter(|d| !d.is_empty()) {
        return decode_base64(data, at(&format!("{key}-data"))).map(Some);
    }
    match file.filter(|f| !f.is_empty()) {
        Some(path) => read_file(path, at(key)).map(Some),
        None => Ok(None),
    }
}

fn ca_pem(cluster: &Cluster, at: &dyn Fn(&str) -> String) -> Result<Option<Vec<u8>>, ConfigError> {
    data_or_file(
        cluster.certificate_authority_data.as_deref(),
        cluster.certificate_authority.as_deref(),
        "certificate-authority",
        at,
    )
}

fn cluster_tls(
    cluster: &Cluster,
    ca_pem: Option<&[u8]>,
    at: &dyn Fn(&str) -> String,
) -> Result<TlsConfig, ConfigError> {
    let insecure = cluster.insecure_skip_tls_verify.unwrap_or(false);
    let mut tls = TlsConfig {
        insecure_skip_verify: insecure,
        ..TlsConfig::default()
    };
    if let Some(pem) = ca_pem {
        if insecure {
            return Err(invalid(
                at("insecure-skip-tls-verify"),
                "a CA (certificate-authority) and insecure-skip-tls-verify cannot both be set",
            ));
        }
        tls.root_certs = parse_pem_certs(pem, &at("certificate-authority"))?;
    }
    tls.server_name = cluster.tls_server_name.clone().filter(|n| !n.is_empty());
    Ok(tls)
}

fn client_identity(
    user: &AuthInfo,
    at: &dyn Fn(&str) -> String,
) -> Result<Option<ClientIdentity>, ConfigError> {
    let cert = data_or_file(
        user.client_certificate_data.as_deref(),
        user.client_certificate.as_deref(),
        "client-certificate",
        at,
    )?;
    let key_data = user
        .client_key_data
        .as_ref()
        .map(|k| k.expose_secret().to_owned());
    let key = data_or_file(
        key_data.as_deref(),
        user.client_key.as_deref(),
        "client-key",
        at,
    )?;
    if key_data.as_deref().is_none_or(str::is_empty) {
        if let Some(path) = user.client_key.as_deref().filter(|p| !p.is_empty()) {
            warn_if_shared(Path::new(path), &at("client-key"));
        }
    }
    match (cert, key) {
        (None, None) => Ok(None),
        (Some(cert), Some(key)) => Ok(Some(ClientIdentity::new(
            parse_pem_certs(&cert, &at("client-certificate"))?,
            parse_pem_key(&key, &at("client-key"))?,
        ))),
        (Some(_), None) => Err(invalid(
            at("client-key"),
            "a client certificate is set without a key",
        )),
        (None, Some(_)) => Err(invalid(
            at("client-certificate"),
            "a client key is set without a certificate",
        )),
    }
}

/// Logs a warning when a private key file can be read by its group or by
/// everyone (mode bits `0o077`), as ssh does: anyone on the machine could
/// then impersonate the user. Unix only; a file that cannot be inspected
/// has already failed to load.
fn warn_if_shared(path: &Path, field_name: &str) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                tracing::warn!(
                    field = field_name,
                    path = %path.display(),
                    mode = format_args!("{mode:o}"),
                    "the private key file is readable by its group or by others; restrict it with chmod 600"
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (path, field_name);
}

fn user_auth(user: &AuthInfo, at: &dyn Fn(&str) -> String) -> Result<Auth, ConfigError> {
    if user.impersonate.as_ref().is_some_and(|a| !a.is_empty()) {
        return Err(invalid(
            at("as"),
            "impersonation is not supported by kcontrol-client",
        ));
    }
    let token = user
        .token
        .as_ref()
        .filter(|t| !t.expose_secret().is_empty());
    let token_file = user.token_file.as_deref().filter(|t| !t.is_empty());
    let basic = user.username.as_ref().filter(|u| !u.is_empty());
    if (token.is_some() || token_file.is_some()) && basic.is_some() {
        return Err(invalid(
            at(""),
            "a token and a username/password are both set; use one",
        ));
    }
    if let Some(token) = token {
        return Ok(Auth::Bearer(token.clone()));
    }
    if let Some(path) = token_file {
        let bytes = read_file(path, at("tokenFile"))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(invalid(at("tokenFile"), format!("{path} is empty")));
        }
        return Ok(Auth::TokenFile(PathBuf::from(path)));
    }
    if let Some(exec) = &user.exec {
        return exec_auth(exec, at);
    }
    if let Some(username) = basic {
        let password = user
            .password
            .clone()
            .unwrap_or_else(|| SecretString::from(""));
        return Ok(Auth::Basic {
            username: username.clone(),
            password,
        });
    }
    if let Some(provider) = &user.auth_provider {
        return Err(invalid(
            at("auth-provider"),
            format!(
                "auth provider {:?} is not supported; use an exec plugin (e.g. gke-gcloud-auth-plugin, kubelogin)",
                provider.name
            ),
        ));
    }
    Ok(Auth::None)
}

fn exec_auth(exec: &ExecConfig, at: &dyn Fn(&str) -> String) -> Result<Auth, ConfigError> {
    if exec.command.is_empty() {
        return Err(invalid(at("exec.command"), "not set"));
    }
    if exec.api_version.is_empty() {
        return Err(invalid(at("exec.apiVersion"), "not set"));
    }
    Ok(Auth::Exec(Box::new(exec.clone())))
}

/// `spec.cluster` of `KUBERNETES_EXEC_INFO` (client.authentication.k8s.io `Cluster`).
fn exec_cluster_info(cluster: &Cluster, ca_pem: Option<&[u8]>) -> serde_json::Value {
    let mut info = serde_json::Map::new();
    info.insert(
        "server".to_owned(),
        cluster.server.clone().unwrap_or_default().into(),
    );
    if let Some(name) = &cluster.tls_server_name {
        info.insert("tls-server-name".to_owned(), name.clone().into());
    }
    if cluster.insecure_skip_tls_verify == Some(true) {
        info.insert("insecure-skip-tls-verify".to_owned(), true.into());
    }
    if let Some(pem) = ca_pem {
        info.insert(
            "certificate-authority-data".to_owned(),
            crate::auth::base64_pem(pem).into(),
        );
    }
    if let Some(ext) = cluster.extensions.iter().find(|e| e.name == EXEC_EXTENSION) {
        info.insert("config".to_owned(), ext.extension.clone());
    }
    serde_json::Value::Object(info)
}
