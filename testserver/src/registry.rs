//! The registry of served resources: built-ins plus whatever CRDs add,
//! looked up by group/version/resource and listed for discovery in
//! kube's order (groups by registration, versions by kube's priority).

use crate::resource::ResourceInfo;
use parking_lot::RwLock;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

type Gvr = (String, String, String);

/// Served resources, by group, version and plural name.
#[derive(Default)]
pub(crate) struct Registry {
    inner: RwLock<Inner>,
}

#[derive(Default)]
struct Inner {
    resources: BTreeMap<Gvr, Arc<ResourceInfo>>,
    groups: Vec<String>,
}

/// A group as discovery shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GroupEntry {
    pub name: String,
    /// Versions, preferred first.
    pub versions: Vec<String>,
}

/// Kube's version priority: GA before beta before alpha, higher numbers
/// first, anything else last in alphabetical order.
pub(crate) fn compare_versions(a: &str, b: &str) -> Ordering {
    fn parse(v: &str) -> Option<(u8, u64, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u64 = rest.get(..digits)?.parse().ok()?;
        let tail = rest.get(digits..)?;
        if tail.is_empty() {
            return Some((3, major, 0));
        }
        let (stage, num) = if let Some(n) = tail.strip_prefix("beta") {
            (2, n)
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (1, n)
        } else {
            return None;
        };
        let minor = if num.is_empty() { 0 } else { num.parse().ok()? };
        Some((stage, major, minor))
    }
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => y.cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

impl Registry {
    /// Registers (or replaces) resource versions.
    pub(crate) fn register(&self, infos: Vec<ResourceInfo>) {
        self.register_shared(infos.into_iter().map(Arc::new).collect());
    }

    /// Registers (or replaces) shared resource versions.
    pub(crate) fn register_shared(&self, infos: Vec<Arc<ResourceInfo>>) {
        let mut inner = self.inner.write();
        for info in infos {
            if !inner.groups.contains(&info.group) {
                inner.groups.push(info.group.clone());
            }
            let key = (
                info.group.clone(),
                info.version.clone(),
                info.resource.clone(),
            );
            inner.resources.insert(key, info);
        }
    }

    /// Removes every version of `group`/`resource`.
    pub(crate) fn unregister(&self, group: &str, resource: &str) {
        let mut inner = self.inner.write();
        inner
            .resources
            .retain(|(g, _, r), _| !(g == group && r == resource));
        let still_used = inner.resources.keys().any(|(g, _, _)| g == group);
        if !still_used {
            inner.groups.retain(|g| g != group);
        }
    }

    /// The resource served at group/version/resource.
    pub(crate) fn get(
        &self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<Arc<ResourceInfo>> {
        self.inner
            .read()
            .resources
            .get(&(group.to_owned(), version.to_owned(), resource.to_owned()))
            .cloned()
    }

    /// The storage version of group/resource.
    pub(crate) fn storage_info(&self, group: &str, resource: &str) -> Option<Arc<ResourceInfo>> {
        let inner = self.inner.read();
        inner
            .resources
            .iter()
            .find(|((g, _, r), i)| g == group && r == resource && i.is_storage_version())
            .map(|(_, i)| i.clone())
    }

    /// Every resource served at group/version.
    pub(crate) fn resources_in(&self, group: &str, version: &str) -> Vec<Arc<ResourceInfo>> {
        let inner = self.inner.read();
        inner
            .resources
            .iter()
            .filter(|((g, v, _), _)| g == group && v == version)
            .map(|(_, i)| i.clone())
            .collect()
    }

    /// Every registered resource version.
    pub(crate) fn all(&self) -> Vec<Arc<ResourceInfo>> {
        self.inner.read().resources.values().cloned().collect()
    }

    /// Groups with their versions, preferred version first.
    pub(crate) fn groups(&self) -> Vec<GroupEntry> {
        let inner = self.inner.read();
        inner
            .groups
            .iter()
            .map(|g| {
                let mut versions: Vec<String> = inner
                    .resources
                    .keys()
                    .filter(|(gg, _, _)| gg == g)
                    .map(|(_, v, _)| v.clone())
                    .collect();
                versions.sort_by(|a, b| compare_versions(a, b));
                versions.dedup();
                GroupEntry {
                    name: g.clone(),
                    versions,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_like_kube() {
        let mut v = vec![
            "v1alpha1",
            "foo",
            "v2beta1",
            "v1",
            "v11alpha2",
            "v2",
            "v1beta2",
            "v10beta3",
            "bar",
        ];
        v.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            v,
            [
                "v2",
                "v1",
                "v10beta3",
                "v2beta1",
                "v1beta2",
                "v11alpha2",
                "v1alpha1",
                "bar",
                "foo"
            ]
        );
    }

    #[test]
    fn registers_and_unregisters() {
        let r = Registry::default();
        r.register_shared(crate::builtin::all());
        assert!(r.get("apps", "v1", "deployments").is_some());
        assert!(r.storage_info("", "configmaps").is_some());
        assert_eq!(r.groups().first().map(|g| g.name.as_str()), Some(""));
        r.unregister("apps", "deployments");
        assert!(r.get("apps", "v1", "deployments").is_none());
        assert!(r.groups().iter().any(|g| g.name == "apps"));
        for resource in ["replicasets", "statefulsets", "daemonsets"] {
            r.unregister("apps", resource);
        }
        assert!(!r.groups().iter().any(|g| g.name == "apps"));
    }
}
