//! CustomResourceDefinitions: approval rule, registration in discovery,
//! schema validation and pruning, status subresource, versions, removal.

use crate::client::Client;
use crate::{foo, foo_crd, server};
use kcontrol_testserver::eventually;
use serde_json::json;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const FOOS: &str = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos";

#[tokio::test]
async fn protected_groups_need_the_approval_annotation() {
    let s = server().await;
    let c = Client::new(&s);
    let mut crd = foo_crd();
    crd["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    let r = c.post(CRDS, &crd).await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["message"],
        "CustomResourceDefinition.apiextensions.k8s.io \"foos.samplecontroller.k8s.io\" is invalid: metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"
    );
    assert_eq!(
        r.json()["details"]["causes"][0]["field"],
        "metadata.annotations[api-approved.kubernetes.io]"
    );
    crd["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": "maybe"});
    assert_eq!(c.post(CRDS, &crd).await.status, 422);
    // other groups need nothing
    let mut other = foo_crd();
    other["metadata"] = json!({"name": "bars.example.com"});
    other["spec"]["group"] = json!("example.com");
    other["spec"]["names"] = json!({"kind": "Bar", "plural": "bars"});
    assert_eq!(c.post(CRDS, &other).await.status, 201);
    let mut misnamed = other.clone();
    misnamed["metadata"]["name"] = json!("wrong.example.com");
    let r = c.post(CRDS, &misnamed).await.json();
    assert!(r["message"].as_str().unwrap().contains("metadata.name: Invalid value: \"wrong.example.com\": must be spec.names.plural+\".\"+spec.group"));
}

#[tokio::test]
async fn a_crd_registers_validates_and_unregisters() {
    let s = server().await;
    let c = Client::new(&s);
    let created = c.post(CRDS, &foo_crd()).await;
    assert_eq!(created.status, 201);
    let conds = created.json()["status"]["conditions"]
        .as_array()
        .unwrap()
        .clone();
    assert!(conds
        .iter()
        .any(|c| c["type"] == "Established" && c["status"] == "True"));
    assert_eq!(created.json()["status"]["acceptedNames"]["kind"], "Foo");
    let groups = c.get("/apis").await.json();
    assert!(groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| g["name"] == "samplecontroller.k8s.io"));
    let rl = c.get("/apis/samplecontroller.k8s.io/v1alpha1").await.json();
    let names: Vec<&str> = rl["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["foos", "foos/status"]);
    assert_eq!(rl["resources"][0]["shortNames"], json!(["fo"]));

    let ok = c.post(FOOS, &foo("one", 3)).await;
    assert_eq!(ok.status, 201);
    assert_eq!(ok.json()["metadata"]["generation"], 1);
    let mut bad = foo("Two", 30);
    bad["spec"]["deploymentName"] = json!("Not_Valid");
    bad["spec"]["mode"] = json!("slow");
    bad["spec"].as_object_mut().unwrap().remove("replicas");
    let r = c.post(FOOS, &bad).await;
    assert_eq!(r.status, 422);
    let body = r.json();
    assert_eq!(body["reason"], "Invalid");
    assert_eq!(body["details"]["group"], "samplecontroller.k8s.io");
    assert_eq!(body["details"]["kind"], "Foo");
    let fields: Vec<(&str, &str)> = body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["field"].as_str().unwrap(), c["reason"].as_str().unwrap()))
        .collect();
    assert!(
        fields.contains(&("metadata.name", "FieldValueInvalid")),
        "{fields:?}"
    );
    assert!(
        fields.contains(&("spec.replicas", "FieldValueRequired")),
        "{fields:?}"
    );
    assert!(
        fields.contains(&("spec.mode", "FieldValueNotSupported")),
        "{fields:?}"
    );
    assert!(
        fields.contains(&("spec.deploymentName", "FieldValueInvalid")),
        "{fields:?}"
    );
    let r = c.post(FOOS, &foo("big", 11)).await.json();
    assert_eq!(r["message"], "Foo.samplecontroller.k8s.io \"big\" is invalid: spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10");
    let mut typed = foo("typed", 1);
    typed["spec"]["replicas"] = json!("three");
    let r = c.post(FOOS, &typed).await.json();
    assert_eq!(r["details"]["causes"][0]["reason"], "FieldValueTypeInvalid");
    assert_eq!(
        r["details"]["causes"][0]["message"],
        "Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
    );

    // unknown fields: pruned with a warning, or refused when strict
    let mut extra = foo("extra", 2);
    extra["spec"]["color"] = json!("blue");
    let r = c.post(FOOS, &extra).await;
    assert_eq!(r.status, 201);
    assert!(r.json()["spec"].get("color").is_none());
    assert_eq!(
        r.header("warning").as_deref(),
        Some("299 - \"unknown field \\\"spec.color\\\"\"")
    );
    extra["metadata"]["name"] = json!("extra2");
    let strict = c
        .post(&format!("{FOOS}?fieldValidation=Strict"), &extra)
        .await;
    assert_eq!(strict.status, 400);
    assert_eq!(
        strict.json()["message"],
        "strict decoding error: unknown field \"spec.color\""
    );

    // status subresource: create drops status, the main update ignores it, /status sets it
    let mut with_status = foo("st", 2);
    with_status["status"] = json!({"availableReplicas": 7});
    let r = c.post(FOOS, &with_status).await.json();
    assert!(r.get("status").is_none());
    let mut st = r.clone();
    st["status"] = json!({"availableReplicas": 2});
    let r = c.put(&format!("{FOOS}/st/status"), &st).await.json();
    assert_eq!(r["status"]["availableReplicas"], 2);
    assert_eq!(
        r["metadata"]["generation"], 1,
        "status writes leave the generation"
    );
    let mut spec = r.clone();
    spec["spec"]["replicas"] = json!(4);
    spec["status"] = json!({"availableReplicas": 99});
    let r = c.put(&format!("{FOOS}/st"), &spec).await.json();
    assert_eq!(
        (
            r["metadata"]["generation"].as_i64(),
            r["status"]["availableReplicas"].as_i64()
        ),
        (Some(2), Some(2))
    );
    let smp = c
        .patch(
            &format!("{FOOS}/st"),
            "application/strategic-merge-patch+json",
            "{}",
        )
        .await;
    assert_eq!(smp.status, 415);

    // printer columns
    let t = c
        .get_as(FOOS, "application/json;as=Table;v=v1;g=meta.k8s.io")
        .await
        .json();
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, ["Name", "Replicas", "Age"]);

    // deleting the CRD removes its objects and its API
    let d = c
        .delete(&format!("{CRDS}/foos.samplecontroller.k8s.io"), None)
        .await;
    assert_eq!(d.status, 200);
    eventually("the CRD to be gone", || async {
        c.get(&format!("{CRDS}/foos.samplecontroller.k8s.io"))
            .await
            .status
            == 404
    })
    .await;
    assert_eq!(c.get(FOOS).await.status, 404);
    assert!(!c.get("/apis").await.json()["groups"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| g["name"] == "samplecontroller.k8s.io"));
    // and it can come back, empty
    assert_eq!(c.post(CRDS, &foo_crd()).await.status, 201);
    assert_eq!(c.get(FOOS).await.json()["items"], json!([]));
}

#[tokio::test]
async fn every_served_version_is_served() {
    let s = server().await;
    let c = Client::new(&s);
    let mut crd = foo_crd();
    let v1 = crd["spec"]["versions"][0].clone();
    let mut v2 = v1.clone();
    v2["name"] = json!("v1beta1");
    v2["storage"] = json!(false);
    crd["spec"]["versions"] = json!([v1, v2]);
    crd["spec"]["scope"] = json!("Cluster");
    assert_eq!(c.post(CRDS, &crd).await.status, 201);
    let mut f = foo("cluster-foo", 1);
    f["apiVersion"] = json!("samplecontroller.k8s.io/v1beta1");
    let r = c
        .post("/apis/samplecontroller.k8s.io/v1beta1/foos", &f)
        .await;
    assert_eq!(r.status, 201, "{}", r.json());
    assert_eq!(r.json()["apiVersion"], "samplecontroller.k8s.io/v1beta1");
    assert!(r.json()["metadata"].get("namespace").is_none());
    let other = c
        .get("/apis/samplecontroller.k8s.io/v1alpha1/foos/cluster-foo")
        .await
        .json();
    assert_eq!(other["apiVersion"], "samplecontroller.k8s.io/v1alpha1");
    let list = c
        .get("/apis/samplecontroller.k8s.io/v1beta1/foos")
        .await
        .json();
    assert_eq!(list["apiVersion"], "samplecontroller.k8s.io/v1beta1");
    assert_eq!(
        list["items"][0]["apiVersion"],
        "samplecontroller.k8s.io/v1beta1"
    );
    let g = c.get("/apis/samplecontroller.k8s.io").await.json();
    assert_eq!(
        g["preferredVersion"]["version"], "v1beta1",
        "kube prefers beta over alpha"
    );
    assert_eq!(
        c.get("/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos")
            .await
            .status,
        404
    );
}
