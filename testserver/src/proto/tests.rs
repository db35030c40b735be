use super::*;
use k8s_pb::api::{apps::v1 as apps, autoscaling::v1 as autoscaling, core::v1 as core};
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

fn s(x: &str) -> Option<String> {
    Some(x.to_owned())
}

fn time(secs: i64) -> Option<metav1::Time> {
    Some(metav1::Time {
        seconds: Some(secs),
        nanos: Some(0),
    })
}

fn object_meta() -> metav1::ObjectMeta {
    metav1::ObjectMeta {
        name: s("web"),
        generate_name: s("web-"),
        namespace: s("default"),
        self_link: s("/apis/apps/v1/namespaces/default/deployments/web"),
        uid: s("0b7c8c4e-6b2f-4d5a-9a43-1c1e9f0e2a10"),
        resource_version: s("42"),
        generation: Some(3),
        creation_timestamp: time(1_764_000_000),
        deletion_timestamp: time(1_764_000_100),
        deletion_grace_period_seconds: Some(30),
        labels: [("app".to_owned(), "web".to_owned())].into(),
        annotations: [("a/b".to_owned(), "c".to_owned())].into(),
        owner_references: vec![metav1::OwnerReference {
            api_version: s("v1"),
            kind: s("Namespace"),
            name: s("default"),
            uid: s("u-1"),
            controller: Some(false),
            block_owner_deletion: Some(true),
        }],
        finalizers: vec!["example.com/f".into()],
        managed_fields: vec![metav1::ManagedFieldsEntry {
            manager: s("kubectl-create"),
            operation: s("Update"),
            api_version: s("apps/v1"),
            time: time(1_764_000_000),
            fields_type: s("FieldsV1"),
            fields_v1: Some(metav1::FieldsV1 {
                raw: Some(br#"{"f:spec":{"f:replicas":{}}}"#.to_vec()),
            }),
            subresource: s("status"),
        }],
    }
}

fn int_or_string_str(v: &str) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(1),
        int_val: Some(0),
        str_val: s(v),
    })
}

fn deployment() -> apps::Deployment {
    let container = core::Container {
        name: s("nginx"),
        image: s("nginx:1.27"),
        command: vec!["nginx".into()],
        args: vec!["-g".into(), "daemon off;".into()],
        working_dir: s("/"),
        ports: vec![core::ContainerPort {
            name: s("http"),
            host_port: Some(8080),
            container_port: Some(80),
            protocol: s("TCP"),
            host_ip: s("0.0.0.0"),
        }],
        env: vec![core::EnvVar {
            name: s("A"),
            value: s("1"),
            value_from: None,
        }],
        resources: Some(core::ResourceRequirements {
            limits: [("cpu".to_owned(), Quantity { string: s("500m") })].into(),
            requests: [("memory".to_owned(), Quantity { string: s("64Mi") })].into(),
            claims: Vec::new(),
        }),
        restart_policy: None,
        volume_mounts: vec![core::VolumeMount {
            name: s("data"),
            read_only: Some(true),
            recursive_read_only: s("Disabled"),
            mount_path: s("/data"),
            sub_path: s("x"),
            mount_propagation: s("None"),
            sub_path_expr: None,
        }],
        termination_message_path: s("/dev/termination-log"),
        termination_message_policy: s("File"),
        image_pull_policy: s("IfNotPresent"),
        stdin: Some(true),
        stdin_once: Some(true),
        tty: Some(true),
        ..Default::default()
    };
    apps::Deployment {
        metadata: Some(object_meta()),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            selector: Some(metav1::LabelSelector {
                match_labels: [("app".to_owned(), "web".to_owned())].into(),
                match_expressions: vec![metav1::LabelSelectorRequirement {
                    key: s("tier"),
                    operator: s("In"),
                    values: vec!["a".into(), "b".into()],
                }],
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(metav1::ObjectMeta {
                    labels: [("app".to_owned(), "web".to_owned())].into(),
                    ..Default::default()
                }),
                spec: Some(core::PodSpec {
                    init_containers: vec![container.clone()],
                    containers: vec![container],
                    restart_policy: s("Always"),
                    termination_grace_period_seconds: Some(30),
                    active_deadline_seconds: Some(100),
                    dns_policy: s("ClusterFirst"),
                    node_selector: [("disk".to_owned(), "ssd".to_owned())].into(),
                    service_account_name: s("sa"),
                    service_account: s("sa"),
                    automount_service_account_token: Some(false),
                    node_name: s("n1"),
                    host_network: Some(true),
                    host_pid: Some(true),
                    host_ipc: Some(true),
                    share_process_namespace: Some(true),
                    image_pull_secrets: vec![core::LocalObjectReference { name: s("pull") }],
                    hostname: s("h"),
                    subdomain: s("sub"),
                    scheduler_name: s("default-scheduler"),
                    tolerations: vec![core::Toleration {
                        key: s("k"),
                        operator: s("Exists"),
                        value: s("v"),
                        effect: s("NoExecute"),
                        toleration_seconds: Some(5),
                    }],
                    priority_class_name: s("high"),
                    priority: Some(1000),
                    runtime_class_name: s("runc"),
                    enable_service_links: Some(true),
                    preemption_policy: s("Never"),
                    overhead: [("cpu".to_owned(), Quantity { string: s("1") })].into(),
                    set_hostname_as_fqdn: Some(false),
                    host_users: Some(true),
                    hostname_override: s("o"),
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_unavailable: int_or_string_str("25%"),
                    max_surge: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(1),
                        str_val: s(""),
                    }),
                }),
            }),
            min_ready_seconds: Some(5),
            revision_history_limit: Some(10),
            paused: Some(true),
            progress_deadline_seconds: Some(600),
        }),
        status: Some(apps::DeploymentStatus {
            observed_generation: Some(3),
            replicas: Some(2),
            updated_replicas: Some(2),
            ready_replicas: Some(1),
            available_replicas: Some(1),
            unavailable_replicas: Some(1),
            terminating_replicas: Some(0),
            conditions: vec![apps::DeploymentCondition {
                r#type: s("Available"),
                status: s("True"),
                last_update_time: time(1_764_000_000),
                last_transition_time: time(1_764_000_001),
                reason: s("MinimumReplicasAvailable"),
                message: s("Deployment has minimum availability."),
            }],
            collision_count: Some(0),
        }),
    }
}

/// protobuf → the server's JSON → protobuf gives the same message.
fn round_trip<T>(api_version: &str, kind: &str, msg: &T) -> Value
where
    T: prost::Message + Default + PartialEq + std::fmt::Debug,
{
    let json = decode_object(&envelope(api_version, kind, msg.encode_to_vec()))
        .unwrap_or_else(|e| panic!("{kind} to JSON: {e}"));
    assert_eq!(json["kind"], kind);
    assert_eq!(json["apiVersion"], api_version);
    let bytes = encode_object(&json).unwrap_or_else(|e| panic!("{kind} from JSON: {e}"));
    let u = pbruntime::Unknown::decode(&bytes[4..]).unwrap_or_default();
    assert_eq!(&bytes[..4], b"k8s\0");
    let tm = u.type_meta.unwrap_or_default();
    assert_eq!(
        (tm.api_version.as_deref(), tm.kind.as_deref()),
        (Some(api_version), Some(kind))
    );
    let back = T::decode(u.raw.unwrap_or_default().as_slice()).unwrap_or_default();
    assert_eq!(&back, msg);
    json
}

#[test]
fn deployment_round_trips() {
    let json = round_trip("apps/v1", "Deployment", &deployment());
    // the JSON is kube-apiserver's
    assert_eq!(
        json["metadata"]["creationTimestamp"],
        "2025-11-24T16:00:00Z"
    );
    assert_eq!(json["spec"]["replicas"], 0);
    assert_eq!(
        json["spec"]["strategy"]["rollingUpdate"],
        json!({"maxUnavailable": "25%", "maxSurge": 1})
    );
    assert_eq!(
        json["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert_eq!(
        json["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "500m"
    );
    assert_eq!(json["spec"]["template"]["spec"]["hostPID"], true);
}

#[test]
fn zero_scalars_are_left_out_of_json_as_go_does() {
    // Go sends non-pointer scalars always; its JSON omits them when zero,
    // and keeps pointer fields (replicas) even at zero
    let d = apps::Deployment {
        metadata: Some(metav1::ObjectMeta {
            name: s("web"),
            generation: Some(0),
            creation_timestamp: time(-62_135_596_800),
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            min_ready_seconds: Some(0),
            paused: Some(false),
            ..Default::default()
        }),
        status: Some(Default::default()),
    };
    let json =
        decode_object(&envelope("apps/v1", "Deployment", d.encode_to_vec())).unwrap_or_default();
    assert_eq!(
        json,
        json!({"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "web"},
               "spec": {"replicas": 0}, "status": {}})
    );
}

#[test]
fn core_kinds_round_trip() {
    let cm = core::ConfigMap {
        metadata: Some(object_meta()),
        immutable: Some(true),
        data: [("k".to_owned(), "v".to_owned())].into(),
        binary_data: [("b".to_owned(), vec![0, 1, 255])].into(),
    };
    let json = round_trip("v1", "ConfigMap", &cm);
    assert_eq!(json["binaryData"]["b"], "AAH/");
    let secret = core::Secret {
        metadata: Some(object_meta()),
        immutable: Some(false),
        data: [("password".to_owned(), b"hunter2".to_vec())].into(),
        string_data: [("user".to_owned(), "admin".to_owned())].into(),
        r#type: s("Opaque"),
    };
    let json = round_trip("v1", "Secret", &secret);
    assert_eq!(json["data"]["password"], "aHVudGVyMg==");
    let ns = core::Namespace {
        metadata: Some(object_meta()),
        spec: Some(core::NamespaceSpec {
            finalizers: vec!["kubernetes".into()],
        }),
        status: Some(core::NamespaceStatus {
            phase: s("Active"),
            conditions: Vec::new(),
        }),
    };
    round_trip("v1", "Namespace", &ns);
    let scale = autoscaling::Scale {
        metadata: Some(object_meta()),
        spec: Some(autoscaling::ScaleSpec { replicas: Some(3) }),
        status: Some(autoscaling::ScaleStatus {
            replicas: Some(1),
            selector: s("app=web"),
        }),
    };
    round_trip("autoscaling/v1", "Scale", &scale);
    let d = deployment();
    let spec = d.spec.unwrap_or_default();
    let rs = apps::ReplicaSet {
        metadata: Some(object_meta()),
        spec: Some(apps::ReplicaSetSpec {
            replicas: Some(0),
            min_ready_seconds: Some(3),
            selector: spec.selector,
            template: spec.template,
        }),
        status: Some(apps::ReplicaSetStatus {
            replicas: Some(2),
            fully_labeled_replicas: Some(2),
            ready_replicas: Some(1),
            available_replicas: Some(1),
            terminating_replicas: Some(0),
            observed_generation: Some(4),
            conditions: vec![apps::ReplicaSetCondition {
                r#type: s("ReplicaFailure"),
                status: s("False"),
                last_transition_time: time(1_764_000_000),
                reason: s("r"),
                message: s("m"),
            }],
        }),
    };
    let json = round_trip("apps/v1", "ReplicaSet", &rs);
    assert_eq!(json["spec"]["replicas"], 0);
}

#[test]
fn status_round_trips() {
    let status = metav1::Status {
        metadata: Some(metav1::ListMeta {
            self_link: s("/x"),
            resource_version: s("7"),
            r#continue: s("token"),
            remaining_item_count: Some(4),
        }),
        status: s("Failure"),
        message: s("deployments.apps \"web\" already exists"),
        reason: s("AlreadyExists"),
        details: Some(metav1::StatusDetails {
            name: s("web"),
            group: s("apps"),
            kind: s("deployments"),
            uid: s("u"),
            causes: vec![metav1::StatusCause {
                reason: s("FieldValueInvalid"),
                message: s("bad"),
                field: s("spec.replicas"),
            }],
            retry_after_seconds: Some(1),
        }),
        code: Some(409),
    };
    round_trip("v1", "Status", &status);
}

#[test]
fn lists_carry_list_meta_and_items() {
    let d = deployment();
    let item =
        decode_object(&envelope("apps/v1", "Deployment", d.encode_to_vec())).unwrap_or_default();
    let bytes = encode_list(
        "apps/v1",
        "DeploymentList",
        &json!({"resourceVersion": "9", "continue": "c"}),
        &[item.clone(), item],
    )
    .unwrap_or_default();
    let u = pbruntime::Unknown::decode(&bytes[4..]).unwrap_or_default();
    assert_eq!(
        u.type_meta.and_then(|t| t.kind).as_deref(),
        Some("DeploymentList")
    );
    let list =
        apps::DeploymentList::decode(u.raw.unwrap_or_default().as_slice()).unwrap_or_default();
    assert_eq!(list.items, vec![d.clone(), d]);
    assert_eq!(
        list.metadata.and_then(|m| m.resource_version).as_deref(),
        Some("9")
    );
}

#[test]
fn watch_frames_are_length_prefixed_watch_events() {
    let obj = envelope("v1", "ConfigMap", Vec::new());
    let f = watch_frame("ADDED", obj.clone());
    let len = u32::from_be_bytes([f[0], f[1], f[2], f[3]]) as usize;
    assert_eq!(len, f.len() - 4);
    let ev = metav1::WatchEvent::decode(&f[4..]).unwrap_or_default();
    assert_eq!(ev.r#type.as_deref(), Some("ADDED"));
    assert_eq!(ev.object.and_then(|o| o.raw), Some(obj));
}

#[test]
fn unsupported_fields_are_named() {
    let mut d = deployment();
    if let Some(spec) = d
        .spec
        .as_mut()
        .and_then(|s| s.template.as_mut())
        .and_then(|t| t.spec.as_mut())
    {
        spec.affinity = Some(Default::default());
    }
    let err = decode_object(&envelope("apps/v1", "Deployment", d.encode_to_vec()));
    assert_eq!(
        err,
        Err(ProtoError::Unsupported(
            "spec.template.spec.affinity".into()
        ))
    );
    // a stored object with a field no message has
    let mut json = decode_object(&envelope(
        "apps/v1",
        "Deployment",
        deployment().encode_to_vec(),
    ))
    .unwrap_or_default();
    json["spec"]["template"]["spec"]["containers"][0]["livenessProbe"] = json!({"exec": {}});
    assert_eq!(
        encode_object(&json),
        Err(ProtoError::Unsupported(
            "spec.template.spec.containers[0].livenessProbe".into()
        ))
    );
    json["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .map(|m| m.remove("livenessProbe"));
    json["spec"]["bogus"] = json!(1);
    assert_eq!(
        encode_object(&json),
        Err(ProtoError::Unsupported("spec.bogus".into()))
    );
}

#[test]
fn malformed_input_is_an_error() {
    assert!(matches!(decode_object(b"{}"), Err(ProtoError::Decode(_))));
    assert!(matches!(
        decode_object(b"k8s\0\xff\xff"),
        Err(ProtoError::Decode(_))
    ));
    assert!(matches!(
        decode_object(&envelope("v1", "Pod", Vec::new())),
        Err(ProtoError::UnknownKind(_))
    ));
    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": 1}});
    assert!(matches!(
        encode_object(&bad),
        Err(ProtoError::Invalid { field, .. }) if field == "data.k"
    ));
    let bad =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1u64 << 40}});
    assert!(matches!(
        encode_object(&bad),
        Err(ProtoError::Invalid { field, .. }) if field == "spec.replicas"
    ));
}

proptest::proptest! {
    /// Outside input never panics: any bytes in a Deployment envelope
    /// either convert or give an error, and what converts encodes again.
    #[test]
    fn arbitrary_bodies_never_panic(raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
        for kind in ["Deployment", "Secret", "Status"] {
            let api_version = if kind == "Deployment" { "apps/v1" } else { "v1" };
            if let Ok(json) = decode_object(&envelope(api_version, kind, raw.clone())) {
                let _ = encode_object(&json);
            }
        }
    }

    /// Any time a protobuf client sends converts without panicking.
    #[test]
    fn any_time_converts(seconds in proptest::prelude::any::<i64>()) {
        let cm = core::ConfigMap {
            metadata: Some(metav1::ObjectMeta { creation_timestamp: time(seconds), ..Default::default() }),
            ..Default::default()
        };
        if let Ok(json) = decode_object(&envelope("v1", "ConfigMap", cm.encode_to_vec())) {
            let _ = encode_object(&json);
        }
    }
}
