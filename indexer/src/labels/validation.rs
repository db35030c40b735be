//! Label key and value validation, with the rules of Kubernetes'
//! apimachinery: a key is an optional DNS-subdomain prefix and `/`, then a
//! name of at most 63 characters; a value is empty or at most 63 characters.

use super::RequirementError;

/// Longest name part of a key, and longest value.
const MAX_NAME_LEN: usize = 63;
/// Longest DNS-subdomain prefix of a key.
const MAX_PREFIX_LEN: usize = 253;

/// What a name part or value must look like.
const NAME_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', \
     and must start and end with an alphanumeric character";

/// Checks a label key: `[prefix/]name`, the prefix a lowercase RFC 1123 DNS
/// subdomain of at most 253 characters, the name 1 to 63 characters of
/// `[A-Za-z0-9_.-]` starting and ending with an alphanumeric character.
///
/// ```
/// use kcontrol_indexer::labels::validate_key;
///
/// assert!(validate_key("app.kubernetes.io/name").is_ok());
/// assert!(validate_key("tier").is_ok());
/// assert!(validate_key("Example.com/x").is_err()); // uppercase prefix
/// assert!(validate_key("a/b/c").is_err());
/// ```
pub fn validate_key(key: &str) -> Result<(), RequirementError> {
    key_problem(key).map_or(Ok(()), |reason| {
        Err(RequirementError::InvalidKey {
            key: key.to_owned(),
            reason,
        })
    })
}

/// Checks a label value: empty, or at most 63 characters of `[A-Za-z0-9_.-]`
/// starting and ending with an alphanumeric character.
///
/// ```
/// use kcontrol_indexer::labels::validate_value;
///
/// assert!(validate_value("").is_ok());
/// assert!(validate_value("v1.2_beta-3").is_ok());
/// assert!(validate_value("-leading-dash").is_err());
/// ```
pub fn validate_value(value: &str) -> Result<(), RequirementError> {
    value_problem(value).map_or(Ok(()), |reason| {
        Err(RequirementError::InvalidValue {
            value: value.to_owned(),
            reason,
        })
    })
}

fn key_problem(key: &str) -> Option<String> {
    let name = match key.split_once('/') {
        None => key,
        Some((_, name)) if name.contains('/') => {
            return Some("must contain at most one '/' (an optional DNS subdomain prefix and '/', then a name)".to_owned());
        }
        Some((prefix, name)) => {
            if let Some(problem) = prefix_problem(prefix) {
                return Some(format!("prefix part {problem}"));
            }
            name
        }
    };
    name_problem(name).map(|problem| format!("name part {problem}"))
}

fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("must not be empty".to_owned())
    } else if name.len() > MAX_NAME_LEN {
        Some(format!("must be no more than {MAX_NAME_LEN} characters"))
    } else if !is_qualified_name(name) {
        Some(NAME_RULE.to_owned())
    } else {
        None
    }
}

fn prefix_problem(prefix: &str) -> Option<String> {
    if prefix.is_empty() {
        Some("must not be empty".to_owned())
    } else if prefix.len() > MAX_PREFIX_LEN {
        Some(format!("must be no more than {MAX_PREFIX_LEN} characters"))
    } else if !is_dns1123_subdomain(prefix) {
        Some(
            "must be a lowercase RFC 1123 subdomain: lowercase alphanumeric characters, '-' \
             or '.', starting and ending with an alphanumeric character"
                .to_owned(),
        )
    } else {
        None
    }
}

fn value_problem(value: &str) -> Option<String> {
    if value.len() > MAX_NAME_LEN {
        Some(format!("must be no more than {MAX_NAME_LEN} characters"))
    } else if !value.is_empty() && !is_qualified_name(value) {
        Some(NAME_RULE.to_owned())
    } else {
        None
    }
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_name(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`
fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(is_dns1123_label_chars)
}

fn is_dns1123_label_chars(label: &str) -> bool {
    let lower_alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = label.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            lower_alnum(first)
                && lower_alnum(last)
                && bytes.iter().all(|b| lower_alnum(b) || *b == b'-')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_apimachinery() {
        let long_name = "a".repeat(63);
        let long_prefix = format!("{}.com", "a".repeat(249));
        for good in [
            "a",
            "A",
            "1234",
            "1foo",
            "x_y.z-w",
            long_name.as_str(),
            "example.com/name",
            "0.1.2.domain/99",
            "this-is-a-dns.domain.com/key-with-dash",
            &format!("{long_prefix}/n"),
        ] {
            assert!(validate_key(good).is_ok(), "{good} should be valid");
        }
        let too_long_name = "a".repeat(64);
        let too_long_prefix = format!("{}.com/n", "a".repeat(250));
        for bad in [
            "",
            "-a",
            "a-",
            "_a",
            "a b",
            "a~",
            "a||b",
            too_long_name.as_str(),
            &"a".repeat(254),
            "/name",
            "prefix/",
            "a/b/c",
            "Example.com/name",
            "ex_ample.com/name",
            "-example.com/name",
            "example..com/name",
            "example.com./name",
            too_long_prefix.as_str(),
            "é",
        ] {
            let err = validate_key(bad).unwrap_err();
            assert!(matches!(err, RequirementError::InvalidKey { .. }), "{bad}");
        }
    }

    #[test]
    fn values_follow_apimachinery() {
        let longest = "v".repeat(63);
        for good in ["", "a", "1", "a.b_c-d", "10.10.100.1", longest.as_str()] {
            assert!(validate_value(good).is_ok(), "{good:?} should be valid");
        }
        let too_long = "v".repeat(64);
        for bad in ["-a", "a-", ".", "a/b", "a b", "a:b", too_long.as_str(), "ü"] {
            assert!(validate_value(bad).is_err(), "{bad:?} should be invalid");
        }
    }
}
