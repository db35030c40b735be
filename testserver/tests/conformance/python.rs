//! The Python `kubernetes` client (Debian's python3-kubernetes) as a second
//! real client: create, list with limit/continue, watch, custom objects.
//! Skipped (with one printed line) when it cannot be imported.

use kcontrol_testserver::{wait_with_output_within, TestServer};
use std::process::{Command, Stdio};
use std::time::Duration;

const PYTHON: &str = "/usr/bin/python3";

const SCRIPT: &str = r#"
import sys, threading, time
from kubernetes import client, config, watch

config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
ns = "default"
for i in range(5):
    core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"py-{i}", labels={"from": "python"}), data={"i": str(i)}))

names, token, pages = [], None, 0
while True:
    page = core.list_namespaced_config_map(ns, limit=2, _continue=token, label_selector="from=python")
    pages += 1
    names += [c.metadata.name for c in page.items]
    token = page.metadata._continue
    if not token:
        break
assert names == [f"py-{i}" for i in range(5)], names
assert pages == 3, pages

listed = core.list_namespaced_config_map(ns)
rv = listed.metadata.resource_version

def later():
    # write once the watch below is open (the server counts it), so its
    # events come live rather than from the history; bounded
    deadline = time.monotonic() + 30
    while core.api_client.call_api("/__admin/counters", "GET", response_type="object", _return_http_data_only=True)["activeWatches"] < 1:
        assert time.monotonic() < deadline, "the watch never opened"
        time.sleep(0.01)
    core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py-late")))
    core.delete_namespaced_config_map("py-0", ns)
threading.Thread(target=later).start()

seen = []
w = watch.Watch()
for ev in w.stream(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=5):
    seen.append((ev["type"], ev["object"].metadata.name))
    if len(seen) == 2:
        w.stop()
assert seen == [("ADDED", "py-late"), ("DELETED", "py-0")], seen

try:
    core.read_namespaced_config_map("py-0", ns)
    raise SystemExit("expected 404")
except client.exceptions.ApiException as e:
    assert e.status == 404, e.status

ext = client.ApiextensionsV1Api()
ext.create_custom_resource_definition({
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"kind": "Widget", "plural": "widgets"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer", "maximum": 5}}}}}}}]}})
custom = client.CustomObjectsApi()
custom.create_namespaced_custom_object("example.com", "v1", ns, "widgets", {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}})
try:
    custom.create_namespaced_custom_object("example.com", "v1", ns, "widgets", {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"size": 9}})
    raise SystemExit("expected 422")
except client.exceptions.ApiException as e:
    assert e.status == 422, e.status
got = custom.list_namespaced_custom_object("example.com", "v1", ns, "widgets")
assert [i["metadata"]["name"] for i in got["items"]] == ["w1"], got
print("python client OK")
"#;

fn python_has_kubernetes() -> bool {
    Command::new(PYTHON)
        .args(["-c", "import kubernetes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_works() {
    if !python_has_kubernetes() {
        println!("{PYTHON} cannot import kubernetes (Debian python3-kubernetes): the Python client test was skipped");
        return;
    }
    let s = TestServer::builder().tls(true).start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    s.write_kubeconfig(&kubeconfig).unwrap();
    let script = dir.path().join("client.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let (ok, out, err) = tokio::task::block_in_place(|| {
        let child = Command::new(PYTHON)
            .arg(&script)
            .arg(&kubeconfig)
            .env("HOME", dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python starts");
        let out = wait_with_output_within("the Python client", Duration::from_secs(60), child);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    });
    assert!(ok, "python failed:\n{out}\n{err}");
    assert!(out.contains("python client OK"), "{out}");
}
