#!/usr/bin/env python3
"""Measures leader hand-over of `sample-controller --leader-elect` and its
idle CPU, against the `kcontrol-testserver` binary.

    cargo build --release -p sample-controller -p kcontrol-testserver
    python3 sample-controller/scripts/measure-handover.py [--bin-dir target/release] [--runs 5]

Hand-over time: from the signal to the leader (SIGTERM or SIGKILL) until
the Lease names the standby (polled every 5 ms). Idle CPU: user+system CPU
seconds of a leader over --idle-seconds, with nothing to do, as a
percentage of one core. Durations are client-go's defaults (lease 15 s,
renew deadline 10 s, retry 2 s) unless given.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.load(r)
    except Exception:
        return None


def holder(server):
    lease = get(f"{server}/apis/coordination.k8s.io/v1/namespaces/default/leases/sample-controller")
    return (lease or {}).get("spec", {}).get("holderIdentity")


def wait(pred, what, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return time.monotonic()
        time.sleep(0.005)
    sys.exit(f"timed out waiting for {what}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin-dir", default=os.path.join(ROOT, "target", "release"))
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--lease", default="15s")
    p.add_argument("--renew", default="10s")
    p.add_argument("--retry", default="2s")
    p.add_argument("--idle-seconds", type=float, default=60)
    a = p.parse_args()

    tmp = tempfile.mkdtemp(prefix="handover-")
    kubeconfig = os.path.join(tmp, "kubeconfig")
    server_proc = subprocess.Popen(
        [os.path.join(a.bin_dir, "kcontrol-testserver"), "--kubeconfig-out", kubeconfig],
        stdout=subprocess.PIPE, text=True)
    server = server_proc.stdout.readline().strip()
    with open(os.path.join(ROOT, "artifacts", "examples", "crd.yaml")) as f:
        crd = json.dumps(yaml.safe_load(f)).encode()
    req = urllib.request.Request(
        f"{server}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        data=crd, headers={"Content-Type": "application/json"}, method="POST")
    urllib.request.urlopen(req, timeout=10).read()

    procs = []

    def replica(identity):
        proc = subprocess.Popen(
            [os.path.join(a.bin_dir, "sample-controller"), "--kubeconfig", kubeconfig,
             "--namespace", "default", "--leader-elect", "--leader-elect-identity", identity,
             "--leader-elect-lease-duration", a.lease, "--leader-elect-renew-deadline", a.renew,
             "--leader-elect-retry-period", a.retry],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        return proc

    def seconds(text):
        return float(text[:-2]) / 1000 if text.endswith("ms") else float(text.rstrip("s"))

    results = {"SIGTERM": [], "SIGKILL": []}
    n = 0
    leader_id = f"r{n}"
    leader = replica(leader_id)
    wait(lambda: holder(server) == leader_id, "the first leader")
    # idle CPU of the leader (nothing to reconcile, renewing every retry period)
    time.sleep(5)
    with open(f"/proc/{leader.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    cpu0, t0 = (int(fields[11]) + int(fields[12])) / tick, time.monotonic()
    time.sleep(a.idle_seconds)
    with open(f"/proc/{leader.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu1, t1 = (int(fields[11]) + int(fields[12])) / tick, time.monotonic()
    idle = 100 * (cpu1 - cpu0) / (t1 - t0)

    for sig in [signal.SIGTERM, signal.SIGKILL]:
        for _ in range(a.runs):
            n += 1
            standby_id = f"r{n}"
            standby = replica(standby_id)
            # the standby starts, syncs and reads the Lease: two retry periods
            time.sleep(2 * seconds(a.retry) + 1)
            t_signal = time.monotonic()
            leader.send_signal(sig)
            t_taken = wait(lambda: holder(server) == standby_id, "the standby")
            leader.wait()
            results[sig.name].append(t_taken - t_signal)
            leader, leader_id = standby, standby_id

    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    server_proc.terminate()
    server_proc.wait()
    print(json.dumps({
        "lease": a.lease, "renew_deadline": a.renew, "retry": a.retry,
        "sigterm_handover_s": [round(x, 3) for x in results["SIGTERM"]],
        "sigterm_median_s": round(statistics.median(results["SIGTERM"]), 3),
        "sigkill_handover_s": [round(x, 3) for x in results["SIGKILL"]],
        "sigkill_median_s": round(statistics.median(results["SIGKILL"]), 3),
        "idle_cpu_percent_of_one_core": round(idle, 3),
        "idle_seconds": a.idle_seconds,
    }, indent=1))


if __name__ == "__main__":
    main()
