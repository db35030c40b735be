//! OpenAPI v3 component schemas of the built-in kinds (the fields a
//! controller and `kubectl explain` use, with kube's patch strategies and
//! merge keys), written for this server.

use serde_json::{json, Map, Value};

fn r(name: &str) -> Value {
    json!({"allOf": [{"$ref": format!("#/components/schemas/{name}")}], "default": {}})
}

fn s(description: &str) -> Value {
    json!({"type": "string", "default": "", "description": description})
}

fn int(description: &str) -> Value {
    json!({"type": "integer", "format": "int32", "description": description})
}

fn map_of_strings(description: &str) -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}, "description": description})
}

fn list_of(name: &str, description: &str, key: Option<&str>) -> Value {
    let mut v = json!({"type": "array", "items": {"default": {}, "allOf": [{"$ref": format!("#/components/schemas/{name}")}]}, "description": description});
    if let Some(k) = key {
        v["x-kubernetes-patch-merge-key"] = json!(k);
        v["x-kubernetes-patch-strategy"] = json!("merge");
        v["x-kubernetes-list-type"] = json!("map");
        v["x-kubernetes-list-map-keys"] = json!([k]);
    }
    v
}

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

fn kind_schema(
    description: &str,
    group: &str,
    version: &str,
    kind: &str,
    mut props: Map<String, Value>,
) -> Value {
    props.insert(
        "apiVersion".into(),
        s("APIVersion defines the versioned schema of this representation of an object."),
    );
    props.insert(
        "kind".into(),
        s("Kind is a string value representing the REST resource this object represents."),
    );
    props.insert("metadata".into(), {
        let mut m = r(META);
        m["description"] = json!("Standard object's metadata.");
        m
    });
    json!({
        "description": description,
        "type": "object",
        "properties": props,
        "x-kubernetes-group-version-kind": [{"group": group, "kind": kind, "version": version}]
    })
}

/// The list schema of a kind.
pub(crate) fn list_schema(item_ref: &str, group: &str, version: &str, list_kind: &str) -> Value {
    json!({
        "description": format!("{list_kind} is a list of objects."),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": s("APIVersion defines the versioned schema of this representation of an object."),
            "items": {"type": "array", "items": {"default": {}, "allOf": [{"$ref": format!("#/components/schemas/{item_ref}")}]}, "description": "List of objects."},
            "kind": s("Kind is a string value representing the REST resource this object represents."),
            "metadata": r(LIST_META)
        },
        "x-kubernetes-group-version-kind": [{"group": group, "kind": list_kind, "version": version}]
    })
}

fn obj(pairs: Vec<(&str, Value)>) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

fn meta_schemas(out: &mut Map<String, Value>) {
    out.insert(META.into(), json!({
        "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        "type": "object",
        "properties": {
            "annotations": map_of_strings("Annotations is an unstructured key value map stored with a resource that may be set by external tools to store and retrieve arbitrary metadata."),
            "creationTimestamp": {"type": "string", "format": "date-time", "description": "CreationTimestamp is a timestamp representing the server time when this object was created."},
            "deletionGracePeriodSeconds": {"type": "integer", "format": "int64", "description": "Number of seconds allowed for this object to gracefully terminate before it will be removed from the system."},
            "deletionTimestamp": {"type": "string", "format": "date-time", "description": "DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted."},
            "finalizers": {"type": "array", "items": {"type": "string", "default": ""}, "x-kubernetes-patch-strategy": "merge", "x-kubernetes-list-type": "set", "description": "Must be empty before the object is deleted from the registry."},
            "generateName": s("GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided."),
            "generation": {"type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state."},
            "labels": map_of_strings("Map of string keys and values that can be used to organize and categorize (scope and select) objects."),
            "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "description": "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow."},
            "name": s("Name must be unique within a namespace."),
            "namespace": s("Namespace defines the space within which each name must be unique."),
            "ownerReferences": list_of("io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference", "List of objects depended by this object.", Some("uid")),
            "resourceVersion": s("An opaque value that represents the internal version of this object."),
            "selfLink": s("Deprecated: selfLink is a legacy read-only field that is no longer populated by the system."),
            "uid": s("UID is the unique in time and space value for this object.")
        }
    }));
    out.insert("io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference".into(), json!({
        "description": "OwnerReference contains enough information to let you identify an owning object.",
        "type": "object",
        "required": ["apiVersion", "kind", "name", "uid"],
        "properties": {
            "apiVersion": s("API version of the referent."),
            "blockOwnerDeletion": {"type": "boolean", "description": "If true, AND if the owner has the \"foregroundDeletion\" finalizer, then the owner cannot be deleted from the key-value store until this reference is removed."},
            "controller": {"type": "boolean", "description": "If true, this reference points to the managing controller."},
            "kind": s("Kind of the referent."),
            "name": s("Name of the referent."),
            "uid": s("UID of the referent.")
        },
        "x-kubernetes-map-type": "atomic"
    }));
    out.insert(LIST_META.into(), json!({
        "description": "ListMeta describes metadata that synthetic resources must have, including lists and various status objects.",
        "type": "object",
        "properties": {
            "continue": s("continue may be set if the user set a limit on the number of items returned."),
            "remainingItemCount": {"type": "integer", "format": "int64", "description": "remainingItemCount is the number of subsequent items in the list which are not included in this list response."},
            "resourceVersion": s("String that identifies the server's internal version of this object."),
            "selfLink": s("Deprecated.")
        }
    }));
    out.insert("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector".into(), json!({
        "description": "A label selector is a label query over a set of resources.",
        "type": "object",
        "properties": {
            "matchExpressions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "description": "matchExpressions is a list of label selector requirements. The requirements are ANDed."},
            "matchLabels": map_of_strings("matchLabels is a map of {key,value} pairs.")
        },
        "x-kubernetes-map-type": "atomic"
    }));
}

fn core_schemas(out: &mut Map<String, Value>) {
    out.insert("io.k8s.api.core.v1.ConfigMap".into(), kind_schema(
        "ConfigMap holds configuration data for pods to consume.", "", "v1", "ConfigMap",
        obj(vec![
            ("binaryData", json!({"type": "object", "additionalProperties": {"type": "string", "format": "byte"}, "description": "BinaryData contains the binary data."})),
            ("data", map_of_strings("Data contains the configuration data.")),
            ("immutable", json!({"type": "boolean", "description": "Immutable, if set to true, ensures that data stored in the ConfigMap cannot be updated."})),
        ]),
    ));
    out.insert("io.k8s.api.core.v1.Secret".into(), kind_schema(
        "Secret holds secret data of a certain type.", "", "v1", "Secret",
        obj(vec![
            ("data", json!({"type": "object", "additionalProperties": {"type": "string", "format": "byte"}, "description": "Data contains the secret data, base64 encoded."})),
            ("immutable", json!({"type": "boolean", "description": "Immutable, if set to true, ensures that data stored in the Secret cannot be updated."})),
            ("stringData", map_of_strings("stringData allows specifying non-binary secret data in string form.")),
            ("type", s("Used to facilitate programmatic handling of secret data.")),
        ]),
    ));
    out.insert("io.k8s.api.core.v1.Namespace".into(), kind_schema(
        "Namespace provides a scope for Names.", "", "v1", "Namespace",
        obj(vec![
            ("spec", json!({"type": "object", "properties": {"finalizers": {"type": "array", "items": {"type": "string", "default": ""}, "description": "Finalizers is an opaque list of values that must be empty to permanently remove object from storage."}}, "description": "Spec defines the behavior of the Namespace."})),
            ("status", json!({"type": "object", "properties": {"phase": s("Phase is the current lifecycle phase of the namespace.")}, "description": "Status describes the current status of a Namespace."})),
        ]),
    ));
    out.insert("io.k8s.api.core.v1.ObjectReference".into(), json!({
        "description": "ObjectReference contains enough information to let you inspect or modify the referred object.",
        "type": "object",
        "properties": {
            "apiVersion": s("API version of the referent."), "fieldPath": s("If referring to a piece of an object instead of an entire object."),
            "kind": s("Kind of the referent."), "name": s("Name of the referent."), "namespace": s("Namespace of the referent."),
            "resourceVersion": s("Specific resourceVersion to which this reference is made, if any."), "uid": s("UID of the referent.")
        },
        "x-kubernetes-map-type": "atomic"
    }));
    out.insert("io.k8s.api.core.v1.Event".into(), {
        let mut e = kind_schema(
            "Event is a report of an event somewhere in the cluster.", "", "v1", "Event",
            obj(vec![
                ("action", s("What action was taken/failed regarding to the Regarding object.")),
                ("count", int("The number of times this event has occurred.")),
                ("eventTime", json!({"type": "string", "format": "date-time", "description": "Time when this Event was first observed."})),
                ("firstTimestamp", json!({"type": "string", "format": "date-time", "description": "The time at which the event was first recorded."})),
                ("involvedObject", {let mut v = r("io.k8s.api.core.v1.ObjectReference"); v["description"] = json!("The object that this event is about."); v}),
                ("lastTimestamp", json!({"type": "string", "format": "date-time", "description": "The time at which the most recent occurrence of this event was recorded."})),
                ("message", s("A human-readable description of the status of this operation.")),
                ("reason", s("This should be a short, machine understandable string that gives the reason for the transition into the object's current status.")),
                ("reportingComponent", s("Name of the controller that emitted this Event.")),
                ("reportingInstance", s("ID of the controller instance.")),
                ("source", json!({"type": "object", "properties": {"component": s("Component from which the event is generated."), "host": s("Node name on which the event is generated.")}, "description": "The component reporting this event."})),
                ("type", s("Type of this event (Normal, Warning), new types could be added in the future")),
            ]),
        );
        e["required"] = json!(["metadata", "involvedObject"]);
        e
    });
}

fn apps_schemas(out: &mut Map<String, Value>) {
    out.insert("io.k8s.api.core.v1.Container".into(), json!({
        "description": "A single application container that you want to run within a pod.",
        "type": "object",
        "required": ["name"],
        "properties": {
            "args": {"type": "array", "items": {"type": "string", "default": ""}, "description": "Arguments to the entrypoint."},
            "command": {"type": "array", "items": {"type": "string", "default": ""}, "description": "Entrypoint array."},
            "env": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge", "description": "List of environment variables to set in the container."},
            "image": s("Container image name."),
            "imagePullPolicy": s("Image pull policy."),
            "name": s("Name of the container specified as a DNS_LABEL."),
            "ports": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "x-kubernetes-patch-merge-key": "containerPort", "x-kubernetes-patch-strategy": "merge", "description": "List of ports to expose from the container."},
            "resources": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "Compute Resources required by this container."},
            "volumeMounts": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "x-kubernetes-patch-merge-key": "mountPath", "x-kubernetes-patch-strategy": "merge", "description": "Pod volumes to mount into the container's filesystem."}
        }
    }));
    out.insert("io.k8s.api.core.v1.PodTemplateSpec".into(), json!({
        "description": "PodTemplateSpec describes the data a pod should have when created from a template",
        "type": "object",
        "properties": {
            "metadata": r(META),
            "spec": {"type": "object", "description": "Specification of the desired behavior of the pod.", "x-kubernetes-preserve-unknown-fields": true, "properties": {
                "containers": list_of("io.k8s.api.core.v1.Container", "List of containers belonging to the pod.", Some("name")),
                "initContainers": list_of("io.k8s.api.core.v1.Container", "List of initialization containers belonging to the pod.", Some("name")),
                "volumes": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge,retainKeys", "description": "List of volumes that can be mounted by containers belonging to the pod."}
            }}
        }
    }));
    out.insert("io.k8s.api.apps.v1.DeploymentCondition".into(), json!({
        "description": "DeploymentCondition describes the state of a deployment at a certain point.",
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "lastTransitionTime": {"type": "string", "format": "date-time", "description": "Last time the condition transitioned from one status to another."},
            "lastUpdateTime": {"type": "string", "format": "date-time", "description": "The last time this condition was updated."},
            "message": s("A human readable message indicating details about the transition."),
            "reason": s("The reason for the condition's last transition."),
            "status": s("Status of the condition, one of True, False, Unknown."),
            "type": s("Type of deployment condition.")
        }
    }));
    out.insert("io.k8s.api.apps.v1.Deployment".into(), kind_schema(
        "Deployment enables declarative updates for Pods and ReplicaSets.", "apps", "v1", "Deployment",
        obj(vec![
            ("spec", json!({"type": "object", "description": "Specification of the desired behavior of the Deployment.", "required": ["selector", "template"], "properties": {
                "minReadySeconds": int("Minimum number of seconds for which a newly created pod should be ready without any of its container crashing."),
                "paused": {"type": "boolean", "description": "Indicates that the deployment is paused."},
                "progressDeadlineSeconds": int("The maximum time in seconds for a deployment to make progress before it is considered to be failed."),
                "replicas": int("Number of desired pods. Defaults to 1."),
                "revisionHistoryLimit": int("The number of old ReplicaSets to retain to allow rollback."),
                "selector": r("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"),
                "strategy": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "The deployment strategy to use to replace existing pods with new ones."},
                "template": r("io.k8s.api.core.v1.PodTemplateSpec")
            }})),
            ("status", json!({"type": "object", "description": "Most recently observed status of the Deployment.", "properties": {
                "availableReplicas": int("Total number of available non-terminating pods targeted by this deployment."),
                "conditions": list_of("io.k8s.api.apps.v1.DeploymentCondition", "Represents the latest available observations of a deployment's current state.", Some("type")),
                "observedGeneration": {"type": "integer", "format": "int64", "description": "The generation observed by the deployment controller."},
                "readyReplicas": int("Total number of non-terminating pods targeted by this Deployment with a Ready Condition."),
                "replicas": int("Total number of non-terminating pods targeted by this deployment."),
                "updatedReplicas": int("Total number of non-terminating pods targeted by this deployment that have the desired template spec.")
            }})),
        ]),
    ));
}

fn other_schemas(out: &mut Map<String, Value>) {
    out.insert("io.k8s.api.apps.v1.ReplicaSet".into(), kind_schema(
        "ReplicaSet ensures that a specified number of pod replicas are running at any given time.", "apps", "v1", "ReplicaSet",
        obj(vec![
            ("spec", json!({"type": "object", "description": "Spec defines the specification of the desired behavior of the ReplicaSet.", "required": ["selector"], "properties": {
                "minReadySeconds": int("Minimum number of seconds for which a newly created pod should be ready without any of its container crashing."),
                "replicas": int("Replicas is the number of desired pods."),
                "selector": r("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"),
                "template": r("io.k8s.api.core.v1.PodTemplateSpec")
            }})),
            ("status", json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "Status is the most recently observed status of the ReplicaSet."})),
        ]),
    ));
    out.insert("io.k8s.api.coordination.v1.Lease".into(), kind_schema(
        "Lease defines a lease concept.", "coordination.k8s.io", "v1", "Lease",
        obj(vec![("spec", json!({"type": "object", "description": "spec contains the specification of the Lease.", "properties": {
            "acquireTime": {"type": "string", "format": "date-time", "description": "acquireTime is a time when the current lease was acquired."},
            "holderIdentity": {"type": "string", "description": "holderIdentity contains the identity of the holder of a current lease."},
            "leaseDurationSeconds": int("leaseDurationSeconds is a duration that candidates for a lease need to wait to force acquire it."),
            "leaseTransitions": int("leaseTransitions is the number of transitions of a lease between holders."),
            "renewTime": {"type": "string", "format": "date-time", "description": "renewTime is a time when the current holder of a lease has last updated the lease."}
        }}))]),
    ));
    let crd = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition";
    out.insert(crd.into(), kind_schema(
        "CustomResourceDefinition represents a resource that should be exposed on the API server.",
        "apiextensions.k8s.io", "v1", "CustomResourceDefinition",
        obj(vec![
            ("spec", json!({"type": "object", "description": "spec describes how the user wants the resources to appear", "required": ["group", "names", "scope", "versions"], "properties": {
                "conversion": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "conversion defines conversion settings for the CRD."},
                "group": s("group is the API group of the defined custom resource."),
                "names": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "names specify the resource and kind names for the custom resource."},
                "preserveUnknownFields": {"type": "boolean", "description": "preserveUnknownFields indicates that object fields which are not specified in the OpenAPI schema should be preserved when persisting to storage."},
                "scope": s("scope indicates whether the defined custom resource is cluster- or namespace-scoped."),
                "versions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "description": "versions is the list of all API versions of the defined custom resource."}
            }})),
            ("status", json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "status indicates the actual state of the CustomResourceDefinition"})),
        ]),
    ));
}

/// Every built-in component schema, by name.
pub(crate) fn builtin() -> Map<String, Value> {
    let mut out = Map::new();
    meta_schemas(&mut out);
    core_schemas(&mut out);
    apps_schemas(&mut out);
    other_schemas(&mut out);
    events_v1_schema(&mut out);
    out
}

fn events_v1_schema(out: &mut Map<String, Value>) {
    let time = |d: &str| json!({"type": "string", "format": "date-time", "description": d});
    let mut e = kind_schema(
        "Event is a report of an event somewhere in the cluster.",
        "events.k8s.io",
        "v1",
        "Event",
        obj(vec![
            ("action", s("action is what action was taken/failed regarding to the regarding object.")),
            ("deprecatedCount", int("deprecatedCount is the deprecated field assuring backward compatibility with core.v1 Event type.")),
            ("deprecatedFirstTimestamp", time("deprecatedFirstTimestamp is the deprecated field assuring backward compatibility with core.v1 Event type.")),
            ("deprecatedLastTimestamp", time("deprecatedLastTimestamp is the deprecated field assuring backward compatibility with core.v1 Event type.")),
            ("eventTime", time("eventTime is the time when this Event was first observed.")),
            ("note", s("note is a human-readable description of the status of this operation.")),
            ("reason", s("reason is why the action was taken.")),
            ("regarding", {let mut v = r("io.k8s.api.core.v1.ObjectReference"); v["description"] = json!("regarding contains the object this Event is about."); v}),
            ("related", {let mut v = r("io.k8s.api.core.v1.ObjectReference"); v["description"] = json!("related is the optional secondary object for more complex actions."); v}),
            ("reportingController", s("reportingController is the name of the controller that emitted this Event.")),
            ("reportingInstance", s("reportingInstance is the ID of the controller instance.")),
            ("series", json!({"type": "object", "properties": {"count": int("count is the number of occurrences in this series up to the last heartbeat time."), "lastObservedTime": time("lastObservedTime is the time when last Event from the series was seen before last heartbeat.")}, "description": "series is data about the Event series this event represents."})),
            ("type", s("type is the type of this event (Normal, Warning).")),
        ]),
    );
    e["required"] = json!(["eventTime"]);
    out.insert("io.k8s.api.events.v1.Event".into(), e);
}

/// Adds `apiVersion`, `kind`, `metadata` and the GVK extension to a CRD's
/// `openAPIV3Schema`.
pub(crate) fn crd_kind_schema(schema: &Value, group: &str, version: &str, kind: &str) -> Value {
    let mut v = schema.clone();
    let m = crate::meta::ensure_object(&mut v);
    let props = crate::meta::ensure_object(m.entry("properties").or_insert(Value::Null));
    props.entry("apiVersion").or_insert(s(
        "APIVersion defines the versioned schema of this representation of an object.",
    ));
    props.entry("kind").or_insert(s(
        "Kind is a string value representing the REST resource this object represents.",
    ));
    props.insert("metadata".into(), {
        let mut m = r(META);
        m["description"] = json!("Standard object's metadata.");
        m
    });
    m.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([{"group": group, "kind": kind, "version": version}]),
    );
    v
}
