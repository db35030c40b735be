//! The JSON mapping of each protobuf message the server converts: the
//! built-in kinds it serves (Deployment, ReplicaSet, ConfigMap, Secret, Namespace,
//! autoscaling/v1 Scale), the `meta/v1` types they use, and Status.

use super::{invalid, message, Convert, ProtoError};
use k8s_pb::api::{apps::v1 as apps, autoscaling::v1 as autoscaling, core::v1 as core};
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as metav1;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

// ---- meta/v1 ----

/// Go's zero time (0001-01-01T00:00:00Z) in Unix seconds: Go encodes a
/// zero non-pointer time in protobuf, and as `null` in JSON.
const GO_ZERO_TIME: i64 = -62_135_596_800;

/// `Time`: an RFC 3339 string at second precision, as Go's JSON has it.
impl Convert for metav1::Time {
    fn omit(&self) -> bool {
        self.seconds.is_none_or(|s| s == GO_ZERO_TIME)
    }
    fn to_json(&self, _: &str) -> Result<Value, ProtoError> {
        Ok(Value::String(crate::timeutil::format_rfc3339(
            self.seconds.unwrap_or_default(),
        )))
    }
    fn from_json(v: &Value, path: &str) -> Result<Self, ProtoError> {
        let s = v
            .as_str()
            .ok_or_else(|| invalid(path, "expected an RFC 3339 time string"))?;
        let seconds = crate::timeutil::parse_rfc3339(s)
            .ok_or_else(|| invalid(path, format!("{s:?} is not an RFC 3339 time")))?;
        Ok(Self {
            seconds: Some(seconds),
            nanos: Some(0),
        })
    }
}

/// `FieldsV1`: the raw bytes are the JSON object itself.
impl Convert for metav1::FieldsV1 {
    fn to_json(&self, path: &str) -> Result<Value, ProtoError> {
        serde_json::from_slice(self.raw.as_deref().unwrap_or(b"{}"))
            .map_err(|e| invalid(path, format!("fieldsV1 is not JSON: {e}")))
    }
    fn from_json(v: &Value, _: &str) -> Result<Self, ProtoError> {
        Ok(Self {
            raw: Some(serde_json::to_vec(v).unwrap_or_default()),
        })
    }
}

message!(nested metav1::ObjectMeta {
    name: "name" => auto,
    generate_name: "generateName" => auto,
    namespace: "namespace" => auto,
    self_link: "selfLink" => auto,
    uid: "uid" => auto,
    resource_version: "resourceVersion" => auto,
    generation: "generation" => zero,
    creation_timestamp: "creationTimestamp" => auto,
    deletion_timestamp: "deletionTimestamp" => auto,
    deletion_grace_period_seconds: "deletionGracePeriodSeconds" => auto,
    labels: "labels" => auto,
    annotations: "annotations" => auto,
    owner_references: "ownerReferences" => auto,
    finalizers: "finalizers" => auto,
    managed_fields: "managedFields" => auto,
});

message!(top metav1::PartialObjectMetadata {
    metadata: "metadata" => auto,
});

message!(nested metav1::ListMeta {
    self_link: "selfLink" => auto,
    resource_version: "resourceVersion" => auto,
    r#continue: "continue" => auto,
    remaining_item_count: "remainingItemCount" => auto,
});

message!(nested metav1::OwnerReference {
    api_version: "apiVersion" => auto,
    kind: "kind" => auto,
    name: "name" => auto,
    uid: "uid" => auto,
    controller: "controller" => auto,
    block_owner_deletion: "blockOwnerDeletion" => auto,
});

message!(nested metav1::ManagedFieldsEntry {
    manager: "manager" => auto,
    operation: "operation" => auto,
    api_version: "apiVersion" => auto,
    time: "time" => auto,
    fields_type: "fieldsType" => auto,
    fields_v1: "fieldsV1" => auto,
    subresource: "subresource" => auto,
});

message!(nested metav1::LabelSelector {
    match_labels: "matchLabels" => auto,
    match_expressions: "matchExpressions" => auto,
});

message!(nested metav1::LabelSelectorRequirement {
    key: "key" => auto,
    operator: "operator" => auto,
    values: "values" => auto,
});

message!(top metav1::Status {
    metadata: "metadata" => auto,
    status: "status" => auto,
    message: "message" => auto,
    reason: "reason" => auto,
    details: "details" => auto,
    code: "code" => zero,
});

message!(nested metav1::StatusDetails {
    name: "name" => auto,
    group: "group" => auto,
    kind: "kind" => auto,
    uid: "uid" => auto,
    causes: "causes" => auto,
    retry_after_seconds: "retryAfterSeconds" => zero,
});

message!(nested metav1::StatusCause {
    reason: "reason" => auto,
    message: "message" => auto,
    field: "field" => auto,
});

/// `IntOrString`: a JSON number or string.
impl Convert for IntOrString {
    fn to_json(&self, _: &str) -> Result<Value, ProtoError> {
        Ok(if self.r#type == Some(1) {
            Value::String(self.str_val.clone().unwrap_or_default())
        } else {
            Value::from(self.int_val.unwrap_or_default())
        })
    }
    fn from_json(v: &Value, path: &str) -> Result<Self, ProtoError> {
        match v {
            Value::String(s) => Ok(Self {
                r#type: Some(1),
                int_val: Some(0),
                str_val: Some(s.clone()),
            }),
            _ => Ok(Self {
                r#type: Some(0),
                int_val: Some(i32::from_json(v, path)?),
                str_val: Some(String::new()),
            }),
        }
    }
}

/// `Quantity`: its string.
impl Convert for Quantity {
    fn to_json(&self, _: &str) -> Result<Value, ProtoError> {
        Ok(Value::String(self.string.clone().unwrap_or_default()))
    }
    fn from_json(v: &Value, path: &str) -> Result<Self, ProtoError> {
        let s = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => return Err(invalid(path, "expected a quantity")),
        };
        Ok(Self { string: Some(s) })
    }
}

// ---- core/v1 ----

message!(top core::ConfigMap {
    metadata: "metadata" => auto,
    immutable: "immutable" => auto,
    data: "data" => auto,
    binary_data: "binaryData" => bytes_map,
});

message!(top core::Secret {
    metadata: "metadata" => auto,
    immutable: "immutable" => auto,
    data: "data" => bytes_map,
    string_data: "stringData" => auto,
    r#type: "type" => auto,
});

message!(top core::Namespace {
    metadata: "metadata" => auto,
    spec: "spec" => auto,
    status: "status" => auto,
});

message!(nested core::NamespaceSpec {
    finalizers: "finalizers" => auto,
});

message!(nested core::NamespaceStatus {
    phase: "phase" => auto,
    conditions: "conditions" => unsupported,
});

message!(nested core::PodTemplateSpec {
    metadata: "metadata" => auto,
    spec: "spec" => auto,
});

message!(nested core::PodSpec {
    volumes: "volumes" => unsupported,
    init_containers: "initContainers" => auto,
    containers: "containers" => auto,
    ephemeral_containers: "ephemeralContainers" => unsupported,
    restart_policy: "restartPolicy" => auto,
    termination_grace_period_seconds: "terminationGracePeriodSeconds" => auto,
    active_deadline_seconds: "activeDeadlineSeconds" => auto,
    dns_policy: "dnsPolicy" => auto,
    node_selector: "nodeSelector" => auto,
    service_account_name: "serviceAccountName" => auto,
    service_account: "serviceAccount" => auto,
    automount_service_account_token: "automountServiceAccountToken" => auto,
    node_name: "nodeName" => auto,
    host_network: "hostNetwork" => zero,
    host_pid: "hostPID" => zero,
    host_ipc: "hostIPC" => zero,
    share_process_namespace: "shareProcessNamespace" => auto,
    security_context: "securityContext" => unsupported,
    image_pull_secrets: "imagePullSecrets" => auto,
    hostname: "hostname" => auto,
    subdomain: "subdomain" => auto,
    affinity: "affinity" => unsupported,
    scheduler_name: "schedulerName" => auto,
    tolerations: "tolerations" => auto,
    host_aliases: "hostAliases" => unsupported,
    priority_class_name: "priorityClassName" => auto,
    priority: "priority" => auto,
    dns_config: "dnsConfig" => unsupported,
    readiness_gates: "readinessGates" => unsupported,
    runtime_class_name: "runtimeClassName" => auto,
    enable_service_links: "enableServiceLinks" => auto,
    preemption_policy: "preemptionPolicy" => auto,
    overhead: "overhead" => auto,
    topology_spread_constraints: "topologySpreadConstraints" => unsupported,
    set_hostname_as_fqdn: "setHostnameAsFQDN" => auto,
    os: "os" => unsupported,
    host_users: "hostUsers" => auto,
    scheduling_gates: "schedulingGates" => unsupported,
    resource_claims: "resourceClaims" => unsupported,
    resources: "resources" => unsupported,
    hostname_override: "hostnameOverride" => auto,
    workload_ref: "workloadRef" => unsupported,
});

message!(nested core::LocalObjectReference {
    name: "name" => auto,
});

message!(nested core::Toleration {
    key: "key" => auto,
    operator: "operator" => auto,
    value: "value" => auto,
    effect: "effect" => auto,
    toleration_seconds: "tolerationSeconds" => auto,
});

message!(nested core::Container {
    name: "name" => auto,
    image: "image" => auto,
    command: "command" => auto,
    args: "args" => auto,
    working_dir: "workingDir" => auto,
    ports: "ports" => auto,
    env_from: "envFrom" => unsupported,
    env: "env" => auto,
    resources: "resources" => auto,
    resize_policy: "resizePolicy" => unsupported,
    restart_policy: "restartPolicy" => auto,
    restart_policy_rules: "restartPolicyRules" => unsupported,
    volume_mounts: "volumeMounts" => auto,
    volume_devices: "volumeDevices" => unsupported,
    liveness_probe: "livenessProbe" => unsupported,
    readiness_probe: "readinessProbe" => unsupported,
    startup_probe: "startupProbe" => unsupported,
    lifecycle: "lifecycle" => unsupported,
    termination_message_path: "terminationMessagePath" => auto,
    termination_message_policy: "terminationMessagePolicy" => auto,
    image_pull_policy: "imagePullPolicy" => auto,
    security_context: "securityContext" => unsupported,
    stdin: "stdin" => zero,
    stdin_once: "stdinOnce" => zero,
    tty: "tty" => zero,
});

message!(nested core::ContainerPort {
    name: "name" => auto,
    host_port: "hostPort" => zero,
    container_port: "containerPort" => auto,
    protocol: "protocol" => auto,
    host_ip: "hostIP" => auto,
});

message!(nested core::EnvVar {
    name: "name" => auto,
    value: "value" => auto,
    value_from: "valueFrom" => unsupported,
});

message!(nested core::ResourceRequirements {
    limits: "limits" => auto,
    requests: "requests" => auto,
    claims: "claims" => unsupported,
});

message!(nested core::VolumeMount {
    name: "name" => auto,
    read_only: "readOnly" => zero,
    recursive_read_only: "recursiveReadOnly" => auto,
    mount_path: "mountPath" => auto,
    sub_path: "subPath" => auto,
    mount_propagation: "mountPropagation" => auto,
    sub_path_expr: "subPathExpr" => auto,
});

// ---- apps/v1 ----

message!(top apps::Deployment {
    metadata: "metadata" => auto,
    spec: "spec" => auto,
    status: "status" => auto,
});

message!(nested apps::DeploymentSpec {
    replicas: "replicas" => auto,
    selector: "selector" => auto,
    template: "template" => auto,
    strategy: "strategy" => auto,
    min_ready_seconds: "minReadySeconds" => zero,
    revision_history_limit: "revisionHistoryLimit" => auto,
    paused: "paused" => zero,
    progress_deadline_seconds: "progressDeadlineSeconds" => auto,
});

message!(nested apps::DeploymentStrategy {
    r#type: "type" => auto,
    rolling_update: "rollingUpdate" => auto,
});

message!(nested apps::RollingUpdateDeployment {
    max_unavailable: "maxUnavailable" => auto,
    max_surge: "maxSurge" => auto,
});

message!(nested apps::DeploymentStatus {
    observed_generation: "observedGeneration" => zero,
    replicas: "replicas" => zero,
    updated_replicas: "updatedReplicas" => zero,
    ready_replicas: "readyReplicas" => zero,
    available_replicas: "availableReplicas" => zero,
    unavailable_replicas: "unavailableReplicas" => zero,
    terminating_replicas: "terminatingReplicas" => auto,
    conditions: "conditions" => auto,
    collision_count: "collisionCount" => auto,
});

message!(nested apps::DeploymentCondition {
    r#type: "type" => auto,
    status: "status" => auto,
    last_update_time: "lastUpdateTime" => auto,
    last_transition_time: "lastTransitionTime" => auto,
    reason: "reason" => auto,
    message: "message" => auto,
});

// ---- autoscaling/v1 ----

message!(top autoscaling::Scale {
    metadata: "metadata" => auto,
    spec: "spec" => auto,
    status: "status" => auto,
});

message!(nested autoscaling::ScaleSpec {
    replicas: "replicas" => auto,
});

message!(nested autoscaling::ScaleStatus {
    replicas: "replicas" => auto,
    selector: "selector" => auto,
});

// ---- meta/v1 options ----

message!(top metav1::DeleteOptions {
    grace_period_seconds: "gracePeriodSeconds" => auto,
    preconditions: "preconditions" => auto,
    orphan_dependents: "orphanDependents" => auto,
    propagation_policy: "propagationPolicy" => auto,
    dry_run: "dryRun" => auto,
    ignore_store_read_error_with_cluster_breaking_potential:
        "ignoreStoreReadErrorWithClusterBreakingPotential" => auto,
});

message!(nested metav1::Preconditions {
    uid: "uid" => auto,
    resource_version: "resourceVersion" => auto,
});

message!(top apps::ReplicaSet {
    metadata: "metadata" => auto,
    spec: "spec" => auto,
    status: "status" => auto,
});

message!(nested apps::ReplicaSetSpec {
    replicas: "replicas" => auto,
    min_ready_seconds: "minReadySeconds" => zero,
    selector: "selector" => auto,
    template: "template" => auto,
});

message!(nested apps::ReplicaSetStatus {
    replicas: "replicas" => auto,
    fully_labeled_replicas: "fullyLabeledReplicas" => zero,
    ready_replicas: "readyReplicas" => zero,
    available_replicas: "availableReplicas" => zero,
    terminating_replicas: "terminatingReplicas" => auto,
    observed_generation: "observedGeneration" => zero,
    conditions: "conditions" => auto,
});

message!(nested apps::ReplicaSetCondition {
    r#type: "type" => auto,
    status: "status" => auto,
    last_transition_time: "lastTransitionTime" => auto,
    reason: "reason" => auto,
    message: "message" => auto,
});
