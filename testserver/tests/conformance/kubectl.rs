//! kubectl as a real client: apply (client-side and server-side) of a CRD
//! and a custom resource, get with --chunk-size, -o yaml, describe,
//! explain, get --watch, delete. Skipped (with one printed line) when no
//! kubectl is on PATH.

use crate::client::{Client, WAIT};
use crate::cm;
use kcontrol_testserver::{
    eventually, eventually_blocking, wait_with_output_within, TestServer, Verb,
};
use serde_json::json;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

fn kubectl_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

pub(crate) struct Kubectl {
    bin: PathBuf,
    home: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// A TLS testserver and a kubectl with its own home and kubeconfig for
    /// it; `None` (with one printed line naming `what` was skipped) when no
    /// kubectl is on PATH.
    pub(crate) async fn against_a_new_server(what: &str) -> Option<(TestServer, Kubectl)> {
        let Some(bin) = kubectl_path() else {
            println!("kubectl not found on PATH: {what} skipped");
            return None;
        };
        let s = TestServer::builder().tls(true).start().await.unwrap();
        let home = tempfile::tempdir().unwrap();
        let kubeconfig = home.path().join("kubeconfig");
        s.write_kubeconfig(&kubeconfig).unwrap();
        Some((
            s,
            Kubectl {
                bin,
                home,
                kubeconfig,
            },
        ))
    }

    pub(crate) fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.home.path())
            .env("KUBECACHEDIR", self.home.path().join("cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Runs kubectl with a bounded wait; returns (success, stdout, stderr).
    pub(crate) fn run(&self, args: &[&str]) -> (bool, String, String) {
        let child = self.cmd(args).spawn().expect("kubectl starts");
        let out = wait_with_output_within(format!("kubectl {args:?}"), WAIT * 3, child);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args);
        assert!(ok, "kubectl {args:?} failed:\n{out}\n{err}");
        out
    }

    pub(crate) fn file(&self, name: &str, content: &str) -> String {
        let p = self.home.path().join(name);
        std::fs::write(&p, content).unwrap();
        p.to_string_lossy().into_owned()
    }
}

fn artifacts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../artifacts/examples")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drives_the_server() {
    let Some((s, k)) = Kubectl::against_a_new_server("the kubectl tests were").await else {
        return;
    };
    let crd = artifacts().join("crd.yaml").to_string_lossy().into_owned();
    let foo = artifacts()
        .join("example-foo.yaml")
        .to_string_lossy()
        .into_owned();
    let c = Client::new(&s);
    tokio::task::block_in_place(|| {
        assert!(k.ok(&["apply", "-f", &crd]).contains(
            "customresourcedefinition.apiextensions.k8s.io/foos.samplecontroller.k8s.io created"
        ));
        assert!(k
            .ok(&["apply", "-f", &foo])
            .contains("foo.samplecontroller.k8s.io/example-foo created"));
        // client-side apply of a change, then server-side apply
        let foo3 = k.file(
            "foo3.yaml",
            &std::fs::read_to_string(&foo)
                .unwrap()
                .replace("replicas: 1", "replicas: 3"),
        );
        assert!(k.ok(&["apply", "-f", &foo3]).contains("configured"));
        let foo4 = k.file(
            "foo4.yaml",
            &std::fs::read_to_string(&foo)
                .unwrap()
                .replace("replicas: 1", "replicas: 4"),
        );
        assert!(k
            .ok(&["apply", "--server-side", "-f", &foo4])
            .contains("serverside-applied"));
        let obj = s
            .objects()
            .get("foos.samplecontroller.k8s.io", "default", "example-foo")
            .unwrap();
        assert_eq!(obj.value()["spec"]["replicas"], 4);
        assert_eq!(obj.value()["metadata"]["generation"], 3);
        // the schema is enforced
        let foo30 = k.file(
            "foo30.yaml",
            &std::fs::read_to_string(&foo)
                .unwrap()
                .replace("replicas: 1", "replicas: 30"),
        );
        let (ok, _, err) = k.run(&["apply", "-f", &foo30]);
        assert!(!ok);
        assert!(err.contains("spec.replicas: Invalid value: 30: spec.replicas in body should be less than or equal to 10"), "{err}");

        // -o yaml
        let y: serde_json::Value =
            serde_yaml::from_str(&k.ok(&["get", "foo", "example-foo", "-o", "yaml"])).unwrap();
        assert_eq!(y["kind"], "Foo");
        assert_eq!(y["spec"]["deploymentName"], "example-foo");
        assert_eq!(
            y["metadata"]["resourceVersion"],
            obj.resource_version().to_string()
        );

        // describe and explain
        let d = k.ok(&["describe", "foo", "example-foo"]);
        assert!(
            d.contains("Name:") && d.contains("example-foo") && d.contains("Replicas:"),
            "{d}"
        );
        let e = k.ok(&["explain", "foo.spec"]);
        assert!(
            e.contains("replicas") && e.contains("Number of replicas of the Deployment."),
            "{e}"
        );

        // --chunk-size pages through the list
        let many: String = (0..7)
            .map(|i| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: page-{i}\n---\n"))
            .collect();
        let f = k.file("many.yaml", &many);
        k.ok(&["apply", "-f", &f]);
        s.clear_request_log();
        let out = k.ok(&["get", "configmaps", "--chunk-size=3", "-o", "name"]);
        let names: Vec<&str> = out.lines().collect();
        assert_eq!(names.len(), 7, "{out}");
        assert!(names.iter().all(|n| n.starts_with("configmap/page-")));
        let lists: Vec<_> = s
            .request_log()
            .into_iter()
            .filter(|r| r.verb == Some(Verb::List) && r.resource.as_deref() == Some("configmaps"))
            .collect();
        assert_eq!(lists.len(), 3, "three pages: {lists:?}");
        assert!(lists.iter().skip(1).all(|r| r.query.contains("continue=")));
        let table = k.ok(&["get", "configmaps"]);
        assert!(
            table.starts_with("NAME") && table.contains("DATA") && table.contains("page-6"),
            "{table}"
        );

        // kubectl scale goes through the Deployment's scale subresource
        let dep = k.file(
            "web.yaml",
            &serde_yaml::to_string(&crate::deployment("web", 1)).unwrap(),
        );
        k.ok(&["apply", "--server-side", "-f", &dep]);
        assert!(k
            .ok(&["scale", "deployment", "web", "--replicas=3"])
            .contains("deployment.apps/web scaled"));
        let web = s
            .objects()
            .get("deployments.apps", "default", "web")
            .unwrap();
        assert_eq!(web.value()["spec"]["replicas"], 3);
        let scaled_by: Vec<_> = web.value()["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["subresource"] == "scale")
            .map(|e| e["manager"].clone())
            .collect();
        assert_eq!(scaled_by, [json!("kubectl")]);
        // kubectl's apply of the old replicas now conflicts with the scaler
        let (ok, _, err) = k.run(&["apply", "--server-side", "-f", &dep]);
        assert!(!ok);
        assert!(
            err.contains("conflict with \"kubectl\" with subresource \"scale\" using apps/v1: .spec.replicas"),
            "{err}"
        );
    });

    // get --watch with a bounded life
    let mut child = k
        .cmd(&[
            "get",
            "configmaps",
            "--watch",
            "-o",
            "name",
            "--request-timeout=20s",
        ])
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            match stdout.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if String::from_utf8_lossy(&buf).contains("configmap/watched") {
                        break;
                    }
                }
            }
        }
        String::from_utf8_lossy(&buf).into_owned()
    });
    eventually("s.counters().active_watches >= 1", || async {
        s.counters().active_watches >= 1
    })
    .await;
    assert_eq!(
        c.post(
            "/api/v1/namespaces/default/configmaps",
            &cm("watched", json!({}))
        )
        .await
        .status,
        201
    );
    let seen = tokio::task::spawn_blocking(move || reader.join().unwrap())
        .await
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        seen.contains("configmap/page-0") && seen.contains("configmap/watched"),
        "{seen}"
    );

    tokio::task::block_in_place(|| {
        assert!(k.ok(&["delete", "foo", "example-foo"]).contains("deleted"));
        assert!(s
            .objects()
            .get("foos.samplecontroller.k8s.io", "default", "example-foo")
            .is_none());
        k.ok(&["delete", "-f", &crd]);
    });
    eventually("the Foo resource to be served", || async {
        c.get("/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos")
            .await
            .status
            == 404
    })
    .await;
}

/// kubectl's typed clients send built-in objects as protobuf (create) and
/// read them back as protobuf (create, rollout history and undo); scale,
/// rollout status and restart go through JSON and the watch. Skipped when
/// no kubectl is on PATH.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_scales_and_rolls_out_built_in_kinds() {
    let Some((s, k)) = Kubectl::against_a_new_server("the kubectl protobuf test was").await else {
        return;
    };
    tokio::task::block_in_place(|| {
        // create deployment: a protobuf body and a protobuf answer
        let (ok, out, err) = k.run(&[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=2",
            "--port=80",
            "-v=8",
        ]);
        assert!(ok, "{out}\n{err}");
        assert!(out.contains("deployment.apps/web created"), "{out}");
        assert!(
            err.contains("Content-Type: application/vnd.kubernetes.protobuf"),
            "kubectl did not send protobuf:\n{err}"
        );
        assert!(err.contains("201 Created"), "{err}");
        let d = s
            .objects()
            .get("deployments.apps", "default", "web")
            .unwrap();
        let v = d.value();
        assert_eq!(v["spec"]["replicas"], 2);
        assert_eq!(
            v["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx"
        );
        assert_eq!(
            v["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
            80
        );
        assert_eq!(v["spec"]["strategy"]["type"], "RollingUpdate");

        assert!(k
            .ok(&["create", "configmap", "c1", "--from-literal=a=b"])
            .contains("configmap/c1 created"));
        let cm = s.objects().get("configmaps", "default", "c1").unwrap();
        assert_eq!(cm.value()["data"]["a"], "b");
        assert!(k
            .ok(&["create", "secret", "generic", "s1", "--from-literal=p=q"])
            .contains("secret/s1 created"));
        let secret = s.objects().get("secrets", "default", "s1").unwrap();
        assert_eq!(secret.value()["data"]["p"], "cQ==");
        assert!(k
            .ok(&["create", "namespace", "team-a"])
            .contains("namespace/team-a created"));
        // the same name again: the AlreadyExists Status is read from protobuf
        let (ok, _, err) = k.run(&["create", "configmap", "c1"]);
        assert!(!ok);
        assert!(err.contains("configmaps \"c1\" already exists"), "{err}");

        let yaml = k.ok(&["get", "deployment", "web", "-o", "yaml"]);
        assert!(
            yaml.contains("image: nginx") && yaml.contains("replicas: 2"),
            "{yaml}"
        );
        // no zero-valued Go fields that protobuf always carries
        assert!(!yaml.contains("minReadySeconds: 0"), "{yaml}");

        assert!(k
            .ok(&["scale", "deployment", "web", "--replicas=3"])
            .contains("deployment.apps/web scaled"));
        let d = s
            .objects()
            .get("deployments.apps", "default", "web")
            .unwrap();
        assert_eq!(d.value()["spec"]["replicas"], 3);
        assert!(k
            .ok(&["rollout", "status", "deployment", "web", "--timeout=30s"])
            .contains("successfully rolled out"));
        assert!(k
            .ok(&["rollout", "restart", "deployment", "web"])
            .contains("deployment.apps/web restarted"));
        let d = s
            .objects()
            .get("deployments.apps", "default", "web")
            .unwrap();
        assert!(d.value()["spec"]["template"]["metadata"]["annotations"]
            .get("kubectl.kubernetes.io/restartedAt")
            .is_some());
        assert!(k
            .ok(&["rollout", "status", "deployment", "web", "--timeout=30s"])
            .contains("successfully rolled out"));

        // history and undo read the ReplicaSets (as protobuf lists) that
        // the Deployment simulator keeps per template revision
        let revision = || {
            s.objects()
                .get("deployments.apps", "default", "web")
                .and_then(|d| {
                    d.value()["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                        .as_str()
                        .map(str::to_owned)
                })
        };
        let wait_revision = |want: &str| {
            eventually_blocking(format!("revision {want}"), || {
                revision().as_deref() == Some(want)
            })
        };
        // the restart made revision 2
        wait_revision("2");
        k.ok(&["set", "image", "deployment/web", "nginx=nginx:1.27"]);
        wait_revision("3");
        let (ok, history, err) = k.run(&["rollout", "history", "deployment", "web", "-v=8"]);
        assert!(
            ok,
            "{history}
{err}"
        );
        assert!(
            err.contains("replicasets?labelSelector=app%3Dweb")
                && err.contains("Content-Type: application/vnd.kubernetes.protobuf"),
            "{err}"
        );
        let revisions = history_revisions(&history);
        assert_eq!(revisions, ["1", "2", "3"], "{history}");
        assert!(k
            .ok(&["rollout", "history", "deployment", "web", "--revision=3"])
            .contains("nginx:1.27"));
        assert!(k
            .ok(&["rollout", "undo", "deployment", "web"])
            .contains("deployment.apps/web rolled back"));
        // the template of revision 2 is back, as revision 4
        wait_revision("4");
        let d = s
            .objects()
            .get("deployments.apps", "default", "web")
            .unwrap();
        assert_eq!(
            d.value()["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx"
        );
        let history = k.ok(&["rollout", "history", "deployment", "web"]);
        let revisions = history_revisions(&history);
        assert_eq!(revisions, ["1", "3", "4"], "{history}");
        assert!(k
            .ok(&["rollout", "status", "deployment", "web", "--timeout=30s"])
            .contains("successfully rolled out"));
        // the old ReplicaSet holds no replicas, the restored one all three
        let rs = k.ok(&[
            "get",
            "replicasets",
            "-o",
            "jsonpath={range .items[*]}{.spec.replicas} {end}",
        ]);
        let mut counts: Vec<&str> = rs.split_whitespace().collect();
        counts.sort_unstable();
        assert_eq!(counts, ["0", "0", "3"], "{rs}");
    });
}

/// The REVISION column of `kubectl rollout history`.
fn history_revisions(history: &str) -> Vec<&str> {
    history
        .lines()
        .skip_while(|l| !l.starts_with("REVISION"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}
