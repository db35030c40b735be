//! Every common built-in kind through kubectl: `api-resources` lists it,
//! `create -f` makes one object of each, `get -o json` shows the fields
//! kube-apiserver defaults, `get` prints kube's columns, client-side and
//! server-side `apply -f` change them, `delete -f` removes them. Skipped
//! (with one printed line) when no kubectl is on PATH.

use crate::kubectl::Kubectl;
use serde_json::{json, Value};

/// One object of each kind (JSON documents; kubectl reads YAML, a superset).
/// Atomic lists carry their defaulted values (a port's protocol, a
/// subject's API group): a server-side apply that leaves a default out of
/// an atomic list changes the list, which conflicts with its creator, in
/// kube-apiserver as here.
fn manifests(stage: &str) -> Vec<Value> {
    let labels = json!({"stage": stage});
    let tpl = |app: &str, restart: Option<&str>| {
        let mut spec = json!({"containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"]}]});
        if let Some(r) = restart {
            spec["restartPolicy"] = json!(r);
        }
        json!({"metadata": {"labels": {"app": app}}, "spec": spec})
    };
    let sel = |app: &str| json!({"matchLabels": {"app": app}});
    vec![
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kinds-pod", "labels": {"app": "kinds", "stage": stage}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kinds-svc", "labels": labels},
            "spec": {"selector": {"app": "kinds"}, "ports": [{"port": 80}]}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "kinds-sa", "labels": labels}}),
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "kinds-ep", "labels": labels},
            "subsets": [{"addresses": [{"ip": "10.244.0.5"}], "ports": [{"port": 80, "protocol": "TCP"}]}]}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "kinds-pvc", "labels": labels},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "kinds-pv", "labels": labels},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/kinds"}}}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "kinds-node", "labels": labels}}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "kinds-sts", "labels": labels},
            "spec": {"serviceName": "kinds-svc", "selector": sel("kinds-sts"), "template": tpl("kinds-sts", None)}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "kinds-ds", "labels": labels},
            "spec": {"selector": sel("kinds-ds"), "template": tpl("kinds-ds", None)}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "kinds-deploy", "labels": labels},
            "spec": {"selector": sel("kinds-deploy"), "template": tpl("kinds-deploy", None)}}),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "kinds-rs", "labels": labels},
            "spec": {"selector": sel("kinds-rs"), "template": tpl("kinds-rs", None)}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "kinds-job", "labels": labels},
            "spec": {"template": tpl("kinds-job", Some("Never"))}}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "kinds-cj", "labels": labels},
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": tpl("kinds-cj", Some("OnFailure"))}}}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "kinds-ing", "labels": labels},
            "spec": {"rules": [{"host": "kinds.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "kinds-svc", "port": {"number": 80}}}}]}}]}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "kinds-netpol", "labels": labels},
            "spec": {"podSelector": sel("kinds")}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "kinds-role", "labels": labels},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "kinds-rb", "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kinds-role"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "jane"}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "kinds-cr", "labels": labels},
            "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "kinds-crb", "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kinds-cr"},
            "subjects": [{"apiGroup": "", "kind": "ServiceAccount", "name": "kinds-sa", "namespace": "default"}]}),
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "kinds-pdb", "labels": labels},
            "spec": {"minAvailable": 1, "selector": sel("kinds")}}),
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "kinds-hpa", "labels": labels},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "kinds-deploy"}, "maxReplicas": 3}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "kinds-eps", "labels": labels},
            "addressType": "IPv4", "endpoints": [{"addresses": ["10.244.0.5"]}], "ports": [{"name": "", "port": 80, "protocol": "TCP"}]}),
    ]
}

/// `kubectl get` argument, object name, kube's default columns, and the
/// fields the server fills in (JSON pointer, value).
struct Expect {
    resource: &'static str,
    name: &'static str,
    columns: &'static str,
    fields: Vec<(&'static str, Value)>,
}

fn expectations() -> Vec<Expect> {
    let e = |resource, name, columns, fields| Expect {
        resource,
        name,
        columns,
        fields,
    };
    vec![
        e("pods", "kinds-pod", "NAME READY STATUS RESTARTS AGE", vec![
            ("/spec/restartPolicy", json!("Always")), ("/spec/dnsPolicy", json!("ClusterFirst")),
            ("/spec/terminationGracePeriodSeconds", json!(30)), ("/spec/serviceAccountName", json!("default")),
            ("/spec/containers/0/imagePullPolicy", json!("IfNotPresent")),
            ("/spec/containers/0/terminationMessagePath", json!("/dev/termination-log")),
            ("/spec/containers/0/ports/0/protocol", json!("TCP")),
            ("/status/phase", json!("Pending")), ("/status/qosClass", json!("BestEffort"))]),
        e("services", "kinds-svc", "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE", vec![
            ("/spec/type", json!("ClusterIP")), ("/spec/sessionAffinity", json!("None")),
            ("/spec/ports/0/targetPort", json!(80)), ("/spec/ports/0/protocol", json!("TCP")),
            ("/spec/ipFamilies", json!(["IPv4"])), ("/spec/internalTrafficPolicy", json!("Cluster"))]),
        e("serviceaccounts", "kinds-sa", "NAME SECRETS AGE", vec![]),
        e("endpoints", "kinds-ep", "NAME ENDPOINTS AGE", vec![("/subsets/0/ports/0/protocol", json!("TCP"))]),
        e("persistentvolumeclaims", "kinds-pvc", "NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE", vec![
            ("/status/phase", json!("Pending")), ("/spec/volumeMode", json!("Filesystem"))]),
        e("persistentvolumes", "kinds-pv", "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE", vec![
            ("/spec/persistentVolumeReclaimPolicy", json!("Retain")), ("/status/phase", json!("Pending"))]),
        e("nodes", "kinds-node", "NAME STATUS ROLES AGE VERSION", vec![]),
        e("statefulsets.apps", "kinds-sts", "NAME READY AGE", vec![
            ("/spec/replicas", json!(1)), ("/spec/podManagementPolicy", json!("OrderedReady")),
            ("/spec/updateStrategy", json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})),
            ("/spec/template/spec/restartPolicy", json!("Always")), ("/metadata/generation", json!(1))]),
        e("daemonsets.apps", "kinds-ds", "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE", vec![
            ("/spec/updateStrategy/rollingUpdate/maxUnavailable", json!(1)), ("/spec/revisionHistoryLimit", json!(10))]),
        e("deployments.apps", "kinds-deploy", "NAME READY UP-TO-DATE AVAILABLE AGE", vec![
            ("/spec/strategy/rollingUpdate/maxSurge", json!("25%")),
            ("/spec/template/spec/containers/0/imagePullPolicy", json!("IfNotPresent"))]),
        e("replicasets.apps", "kinds-rs", "NAME DESIRED CURRENT READY AGE", vec![
            ("/spec/replicas", json!(1)), ("/spec/template/spec/schedulerName", json!("default-scheduler"))]),
        e("jobs.batch", "kinds-job", "NAME STATUS COMPLETIONS DURATION AGE", vec![
            ("/spec/backoffLimit", json!(6)), ("/spec/completions", json!(1)), ("/spec/parallelism", json!(1)),
            ("/spec/template/metadata/labels/job-name", json!("kinds-job"))]),
        e("cronjobs.batch", "kinds-cj", "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE", vec![
            ("/spec/concurrencyPolicy", json!("Allow")), ("/spec/successfulJobsHistoryLimit", json!(3))]),
        e("ingresses.networking.k8s.io", "kinds-ing", "NAME CLASS HOSTS ADDRESS PORTS AGE", vec![("/metadata/generation", json!(1))]),
        e("networkpolicies.networking.k8s.io", "kinds-netpol", "NAME POD-SELECTOR AGE", vec![("/spec/policyTypes", json!(["Ingress"]))]),
        e("roles.rbac.authorization.k8s.io", "kinds-role", "NAME CREATED AT", vec![]),
        e("rolebindings.rbac.authorization.k8s.io", "kinds-rb", "NAME ROLE AGE", vec![
            ("/subjects/0/apiGroup", json!("rbac.authorization.k8s.io"))]),
        e("clusterroles.rbac.authorization.k8s.io", "kinds-cr", "NAME CREATED AT", vec![]),
        e("clusterrolebindings.rbac.authorization.k8s.io", "kinds-crb", "NAME ROLE AGE", vec![("/subjects/0/apiGroup", json!(""))]),
        e("poddisruptionbudgets.policy", "kinds-pdb", "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE", vec![("/metadata/generation", json!(1))]),
        e("horizontalpodautoscalers.autoscaling", "kinds-hpa", "NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE", vec![
            ("/spec/minReplicas", json!(1)), ("/spec/metrics/0/resource/target/averageUtilization", json!(80))]),
        e("endpointslices.discovery.k8s.io", "kinds-eps", "NAME ADDRESSTYPE PORTS ENDPOINTS AGE", vec![("/ports/0/protocol", json!("TCP"))]),
    ]
}

fn yaml_docs(objs: &[Value]) -> String {
    objs.iter()
        .map(|o| serde_yaml::to_string(o).unwrap())
        .collect::<Vec<_>>()
        .join("---\n")
}

fn in_service_cidr(ip: &str) -> bool {
    let o: Vec<u32> = ip.split('.').filter_map(|x| x.parse().ok()).collect();
    o.len() == 4 && o[0] == 10 && (96..112).contains(&o[1])
}

/// `kubectl api-resources` lists each kind with kube's short names.
fn check_api_resources(k: &Kubectl) {
    let out = k.ok(&["api-resources"]);
    let rows = [
        ("pods", "po", "v1", "Pod"),
        ("services", "svc", "v1", "Service"),
        ("serviceaccounts", "sa", "v1", "ServiceAccount"),
        ("endpoints", "ep", "v1", "Endpoints"),
        (
            "persistentvolumeclaims",
            "pvc",
            "v1",
            "PersistentVolumeClaim",
        ),
        ("persistentvolumes", "pv", "v1", "PersistentVolume"),
        ("nodes", "no", "v1", "Node"),
        ("statefulsets", "sts", "apps/v1", "StatefulSet"),
        ("daemonsets", "ds", "apps/v1", "DaemonSet"),
        ("deployments", "deploy", "apps/v1", "Deployment"),
        ("replicasets", "rs", "apps/v1", "ReplicaSet"),
        ("jobs", "", "batch/v1", "Job"),
        ("cronjobs", "cj", "batch/v1", "CronJob"),
        ("ingresses", "ing", "networking.k8s.io/v1", "Ingress"),
        (
            "networkpolicies",
            "netpol",
            "networking.k8s.io/v1",
            "NetworkPolicy",
        ),
        ("roles", "", "rbac.authorization.k8s.io/v1", "Role"),
        (
            "rolebindings",
            "",
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
        ),
        (
            "clusterroles",
            "",
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
        ),
        (
            "clusterrolebindings",
            "",
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
        ),
        (
            "poddisruptionbudgets",
            "pdb",
            "policy/v1",
            "PodDisruptionBudget",
        ),
        (
            "horizontalpodautoscalers",
            "hpa",
            "autoscaling/v2",
            "HorizontalPodAutoscaler",
        ),
        ("endpointslices", "", "discovery.k8s.io/v1", "EndpointSlice"),
    ];
    for (name, short, api_version, kind) in rows {
        let want: Vec<&str> = [name, short, api_version]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect();
        let found = out.lines().any(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.first() == Some(&name)
                && cols.last() == Some(&kind)
                && want.iter().all(|w| cols.contains(w))
        });
        assert!(
            found,
            "api-resources lacks {name} ({short} {api_version} {kind}):\n{out}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_lists_applies_and_deletes_every_common_kind() {
    let Some((s, k)) = Kubectl::against_a_new_server("the kinds test was").await else {
        return;
    };
    tokio::task::block_in_place(|| {
        check_api_resources(&k);
        let all = k.file("all.yaml", &yaml_docs(&manifests("one")));
        let created = k.ok(&["create", "-f", &all]);
        assert_eq!(
            created.matches(" created").count(),
            manifests("one").len(),
            "{created}"
        );
        // every object read back in one list, in the file's order
        let listed: Value =
            serde_json::from_str(&k.ok(&["get", "-f", &all, "-o", "json"])).unwrap();
        let items = listed["items"].as_array().unwrap();
        assert_eq!(items.len(), expectations().len());
        for (want, obj) in expectations().iter().zip(items) {
            assert_eq!(obj["metadata"]["name"], want.name);
            assert!(
                obj["metadata"]["uid"].is_string()
                    && obj["metadata"]["resourceVersion"].is_string()
            );
            for (pointer, value) in &want.fields {
                assert_eq!(
                    obj.pointer(pointer),
                    Some(value),
                    "{} {pointer}: {obj:#}",
                    want.resource
                );
            }
            let table = k.ok(&["get", want.resource, want.name]);
            let header: Vec<&str> = table
                .lines()
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            let columns: Vec<&str> = want.columns.split_whitespace().collect();
            assert_eq!(header, columns, "{}:\n{table}", want.resource);
            assert!(table.contains(want.name), "{table}");
        }
        let svc: Value =
            serde_json::from_str(&k.ok(&["get", "svc", "kinds-svc", "-o", "json"])).unwrap();
        let ip = svc["spec"]["clusterIP"].as_str().unwrap_or("");
        assert!(in_service_cidr(ip), "{svc:#}");
        assert_eq!(svc["spec"]["clusterIPs"], json!([ip]));
        let row = k.ok(&["get", "svc", "kinds-svc", "--no-headers"]);
        assert!(row.contains(ip) && row.contains("80/TCP"), "{row}");
        // the `default` ServiceAccount every namespace gets, and the
        // `kubernetes` Service
        k.ok(&["get", "serviceaccount", "default"]);
        let kubernetes = k.ok(&[
            "get",
            "service",
            "kubernetes",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ]);
        assert_eq!(kubernetes, "10.96.0.1");

        // client-side apply over what create made, then server-side apply
        let two = k.file("two.yaml", &yaml_docs(&manifests("two")));
        let applied = k.ok(&["apply", "-f", &two]);
        assert_eq!(
            applied.matches(" configured").count(),
            manifests("two").len(),
            "{applied}"
        );
        let three = k.file("three.yaml", &yaml_docs(&manifests("three")));
        let applied = k.ok(&["apply", "--server-side", "-f", &three]);
        assert_eq!(
            applied.matches(" serverside-applied").count(),
            manifests("three").len(),
            "{applied}"
        );
        let stages = k.ok(&[
            "get",
            "-f",
            &three,
            "-o",
            "jsonpath={range .items[*]}{.metadata.labels.stage} {end}",
        ]);
        assert_eq!(
            stages.split_whitespace().collect::<Vec<_>>(),
            vec!["three"; expectations().len()],
            "{stages}"
        );
        let pod = s.objects().get("pods", "default", "kinds-pod").unwrap();
        let managers: Vec<&str> = pod.value()["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["manager"].as_str())
            .collect();
        assert!(managers.contains(&"kubectl"), "{managers:?}");

        let deleted = k.ok(&["delete", "-f", &three, "--wait=false"]);
        assert_eq!(
            deleted.matches(" deleted").count(),
            manifests("three").len(),
            "{deleted}"
        );
        let (ok, _, err) = k.run(&["get", "-f", &three]);
        assert!(!ok);
        assert_eq!(
            err.matches("NotFound").count(),
            expectations().len(),
            "{err}"
        );
        assert!(s
            .objects()
            .get("services", "default", "kinds-svc")
            .is_none());
    });
}

/// A kind the table lacks, registered from its k8s-openapi type, and a
/// raw resource: served in discovery, CRUD, OpenAPI; the raw one's scale
/// subresource reads and writes where its `ScaleSubresource` says.
#[tokio::test]
async fn registered_resources_are_served() {
    use k8s_openapi::api::storage::v1::StorageClass;
    use kcontrol_testserver::{ResourceInfo, ScaleSubresource, TestServer};
    let mut widget = ResourceInfo::new("example.com", "v1", "Widget", "widgets", true);
    widget.status_subresource = true;
    widget.short_names = vec!["wg".into()];
    widget.scale = Some(ScaleSubresource {
        spec_replicas_path: ".spec.size".into(),
        status_replicas_path: ".status.size".into(),
        label_selector_path: None,
    });
    let s = TestServer::builder()
        .resource(widget)
        .start()
        .await
        .unwrap();
    s.register_resource(ResourceInfo::of::<StorageClass>());
    let c = crate::client::Client::new(&s);
    let disc = c.get("/apis/storage.k8s.io/v1").await.json();
    assert_eq!(disc["resources"][0]["name"], "storageclasses");
    assert_eq!(disc["resources"][0]["namespaced"], false);
    let sc = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
        "provisioner": "example.com/disk", "unknownField": 1});
    let r = c
        .post(
            "/apis/storage.k8s.io/v1/storageclasses?fieldValidation=Warn",
            &sc,
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    assert!(
        r.header("warning")
            .is_some_and(|w| w.contains("unknownField")),
        "{:?}",
        r.headers
    );
    assert!(r.json().get("unknownField").is_none());
    let doc = c.get("/openapi/v3/apis/storage.k8s.io/v1").await.json();
    assert!(
        doc["components"]["schemas"]["io.k8s.api.storage.v1.StorageClass"]["properties"]
            ["provisioner"]
            .is_object()
    );

    let disc = c.get("/apis/example.com/v1").await.json();
    let names: Vec<&str> = disc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(names, ["widgets", "widgets/scale", "widgets/status"]);
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 2, "free": {"form": true}}});
    let r = c
        .post("/apis/example.com/v1/namespaces/default/widgets", &w)
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    assert_eq!(r.json()["spec"]["free"], json!({"form": true}));
    let scale = c
        .get("/apis/example.com/v1/namespaces/default/widgets/w/scale")
        .await
        .json();
    assert_eq!(scale["spec"]["replicas"], 2);
    let r = c
        .patch(
            "/apis/example.com/v1/namespaces/default/widgets/w/scale",
            "application/merge-patch+json",
            r#"{"spec":{"replicas":5}}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let w = c
        .get("/apis/example.com/v1/namespaces/default/widgets/w")
        .await
        .json();
    assert_eq!(w["spec"]["size"], 5);
}
