//! In-process access to the server's objects, for tests that compare a
//! client's cache with the server's exact state, seed data, or load
//! benchmark fixtures without going through HTTP.

use crate::resource::ResourceInfo;
use crate::rest::{Core, DeleteOptions, DeleteOutcome, Subresource, WriteOptions};
use crate::status::StatusError;
use crate::store::StoredObject;
use kcontrol_indexer::TypedResource;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

/// Objects of one resource at one resourceVersion.
#[derive(Debug, Clone)]
pub struct StoredList {
    /// The resourceVersion the list is consistent at.
    pub resource_version: u64,
    /// The objects, ordered by namespace and name.
    pub items: Vec<Arc<StoredObject>>,
}

/// Why a typed [`Objects`] call failed.
#[derive(Debug, thiserror::Error)]
pub enum TypedError {
    /// The server refused the request (as a `Status` it would answer).
    #[error(transparent)]
    Status(#[from] StatusError),
    /// The object did not encode, or the stored one did not decode, as the
    /// Rust type asked for.
    #[error("{what} as {type_name}: {source}")]
    Serde {
        /// What was being done.
        what: &'static str,
        /// The Rust type.
        type_name: &'static str,
        /// What serde said.
        source: serde_json::Error,
    },
}

/// `plural` or `plural.group`, as [`Objects`] names resources.
fn resource_name<K: TypedResource>() -> String {
    let r = K::api_resource();
    if r.group.is_empty() {
        r.plural.into_owned()
    } else {
        format!("{}.{}", r.plural, r.group)
    }
}

fn decode<K: DeserializeOwned>(stored: &StoredObject) -> Result<K, TypedError> {
    K::deserialize(stored.value()).map_err(|source| TypedError::Serde {
        what: "decoding the stored object",
        type_name: std::any::type_name::<K>(),
        source,
    })
}

/// Handle to the stored objects (cheap to clone).
#[derive(Clone)]
pub struct Objects {
    core: Arc<Core>,
}

impl std::fmt::Debug for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Objects")
            .field("resource_version", &self.resource_version())
            .finish()
    }
}

impl Objects {
    pub(crate) fn new(core: Arc<Core>) -> Self {
        Self { core }
    }

    /// Resolves `configmaps`, `deployments.apps` or
    /// `foos.samplecontroller.k8s.io` to the resource's storage version.
    pub fn resource(&self, resource: &str) -> Result<Arc<ResourceInfo>, StatusError> {
        let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
        self.core
            .registry
            .storage_info(group, plural)
            .ok_or_else(|| {
                StatusError::not_found(&crate::status::GroupResource::new(group, plural), "")
            })
    }

    /// The newest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.core.store.current_rv()
    }

    /// One object (`namespace` is ignored for cluster-scoped resources).
    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<Arc<StoredObject>> {
        let info = self.resource(resource).ok()?;
        self.core.get(&info, namespace, name).ok()
    }

    /// Every object of a resource (in one namespace, or all), with the
    /// resourceVersion the list is consistent at.
    pub fn list(&self, resource: &str, namespace: Option<&str>) -> Result<StoredList, StatusError> {
        let info = self.resource(resource)?;
        let prefix = namespace
            .filter(|_| info.namespaced)
            .map(|n| format!("{n}/"))
            .unwrap_or_default();
        let (items, rv, _) = self
            .core
            .resource_store(&info)
            .snapshot(&self.core.store, &prefix);
        Ok(StoredList {
            resource_version: rv,
            items,
        })
    }

    /// Creates an object as a POST would.
    pub fn create(
        &self,
        resource: &str,
        namespace: &str,
        object: Value,
    ) -> Result<Arc<StoredObject>, StatusError> {
        let info = self.resource(resource)?;
        Ok(self
            .core
            .create(&info, namespace, object, &WriteOptions::default())?
            .object)
    }

    /// Replaces an object as a PUT would.
    pub fn update(
        &self,
        resource: &str,
        namespace: &str,
        object: Value,
    ) -> Result<Arc<StoredObject>, StatusError> {
        let info = self.resource(resource)?;
        let name = crate::meta::name(&object).to_owned();
        Ok(self
            .core
            .update(
                &info,
                namespace,
                &name,
                object,
                Subresource::Main,
                &WriteOptions::default(),
            )?
            .object)
    }

    /// Replaces an object's status as a PUT on `/status` would.
    pub fn update_status(
        &self,
        resource: &str,
        namespace: &str,
        object: Value,
    ) -> Result<Arc<StoredObject>, StatusError> {
        let info = self.resource(resource)?;
        let name = crate::meta::name(&object).to_owned();
        Ok(self
            .core
            .update(
                &info,
                namespace,
                &name,
                object,
                Subresource::Status,
                &WriteOptions::default(),
            )?
            .object)
    }

    /// Deletes an object as a DELETE without options would; returns the
    /// object (with `deletionTimestamp` when finalizers hold it).
    pub fn delete(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<StoredObject>, StatusError> {
        let info = self.resource(resource)?;
        match self
            .core
            .delete(&info, namespace, name, &DeleteOptions::default())?
        {
            DeleteOutcome::Deleted(o) | DeleteOutcome::Pending(o) => Ok(o),
        }
    }

    /// One object, decoded as `K` (a `k8s-openapi` type or a custom
    /// resource struct): `get_as::<Secret>("default", "s")` gives the
    /// Secret with its data decoded from base64. `None` when absent.
    pub fn get_as<K: TypedResource + DeserializeOwned>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<K>, TypedError> {
        self.get(&resource_name::<K>(), namespace, name)
            .map(|stored| decode(&stored))
            .transpose()
    }

    /// Every object of `K` (in one namespace, or all), decoded.
    pub fn list_as<K: TypedResource + DeserializeOwned>(
        &self,
        namespace: Option<&str>,
    ) -> Result<Vec<K>, TypedError> {
        self.list(&resource_name::<K>(), namespace)?
            .items
            .iter()
            .map(|stored| decode(stored))
            .collect()
    }

    /// Creates a typed object as a POST would (seeding a test), and
    /// returns it as stored (uid, resourceVersion, defaults filled in).
    pub fn create_typed<K: TypedResource + Serialize + DeserializeOwned>(
        &self,
        namespace: &str,
        object: &K,
    ) -> Result<K, TypedError> {
        let mut value = serde_json::to_value(object).map_err(|source| TypedError::Serde {
            what: "encoding the object",
            type_name: std::any::type_name::<K>(),
            source,
        })?;
        // Custom resource structs may leave apiVersion and kind out.
        if let Some(map) = value.as_object_mut() {
            let r = K::api_resource();
            map.entry("apiVersion")
                .or_insert_with(|| Value::from(r.api_version()));
            map.entry("kind")
                .or_insert_with(|| Value::from(r.kind.as_ref()));
        }
        let stored = self.create(&resource_name::<K>(), namespace, value)?;
        decode(&stored)
    }

    /// Stores many objects of a namespaced or cluster resource quickly
    /// (benchmark fixtures): system metadata is filled in and each object
    /// gets its own resourceVersion and ADDED event, but the validation and
    /// defaulting of a create are skipped. Returns the last resourceVersion.
    pub fn bulk_load(
        &self,
        resource: &str,
        namespace: &str,
        objects: impl IntoIterator<Item = Value>,
    ) -> Result<u64, StatusError> {
        let info = self.resource(resource)?;
        let rs = self.core.resource_store(&info);
        let mut tx = rs.write(&self.core.store);
        let mut last = self.core.store.current_rv();
        for mut obj in objects {
            let name = crate::meta::name(&obj).to_owned();
            if name.is_empty() {
                return Err(StatusError::invalid(
                    &info.group,
                    &info.kind,
                    "",
                    &[crate::status::FieldError::required(
                        "metadata.name",
                        "name or generateName is required",
                    )],
                ));
            }
            if let Some(m) = obj.as_object_mut() {
                m.insert(
                    "apiVersion".into(),
                    Value::String(info.storage_api_version()),
                );
                m.insert("kind".into(), Value::String(info.kind.clone()));
            }
            if info.namespaced {
                crate::meta::set_meta_str(&mut obj, "namespace", namespace);
            }
            crate::rest::strategy::fill_create_metadata(&info, &mut obj);
            let key = crate::rest::object_key(&info, namespace, &name);
            last = tx.put(&key, obj)?.rv;
        }
        Ok(last)
    }
}
