#!/usr/bin/env python3
"""kubernetes_test.py <source-dir>: renders deploy/kubernetes with `kubectl kustomize` (offline)
and checks the rendered objects. There is no cluster here and no offline schema validator in
Debian, so the fields Kubernetes requires, and the ones this deployment depends on, are checked
one by one. Then the pods' environment from the rendered StatefulSet goes through the image's
entrypoint (EPOCHD_DRY_RUN) for each ordinal: --initial-cluster must list every replica under the
headless service. A 5-member overlay (replicas, EPOCHD_CLUSTER_SIZE and the PDB's quorum patched)
covers ordinals 0-4.

Without kubectl, the resources listed in kustomization.yaml are read with python3-yaml and the
image substitution is applied by hand.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

errors = []


def check(condition, message):
    if not condition:
        errors.append(message)
    return condition


def render(directory):
    if shutil.which("kubectl"):
        out = subprocess.run(["kubectl", "kustomize", directory], check=True,
                             capture_output=True, text=True).stdout
        return [d for d in yaml.safe_load_all(out) if d]
    with open(os.path.join(directory, "kustomization.yaml")) as f:
        kustomization = yaml.safe_load(f)
    docs = []
    for resource in kustomization["resources"]:
        with open(os.path.join(directory, resource)) as f:
            docs += [d for d in yaml.safe_load_all(f) if d]
    images = {i["name"]: f'{i["newName"]}:{i["newTag"]}' for i in kustomization.get("images", [])}
    for d in docs:
        if d["kind"] == "StatefulSet":
            for c in d["spec"]["template"]["spec"]["containers"]:
                c["image"] = images.get(c["image"], c["image"])
    return docs


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def container_port(container, port):
    """The number a probe's or service's port (name or number) resolves to, or None."""
    for p in container.get("ports", []):
        if port in (p.get("name"), p["containerPort"]):
            return p["containerPort"]
    return None


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def check_objects(docs):
    for d in docs:
        name = d.get("metadata", {}).get("name")
        check(d.get("apiVersion") and d.get("kind") and name,
              f"an object lacks apiVersion, kind or metadata.name: {d}")
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    for kind, count in [("StatefulSet", 1), ("Service", 2), ("PodDisruptionBudget", 1)]:
        check(len(by_kind.get(kind, [])) == count, f"expected {count} {kind}, got "
              f"{len(by_kind.get(kind, []))}")
    if errors:
        return None
    sts = by_kind["StatefulSet"][0]
    spec = sts["spec"]
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"]["labels"]
    replicas = spec["replicas"]
    check(selects(spec["selector"]["matchLabels"], labels), "selector misses the pod labels")
    check(spec.get("podManagementPolicy") == "Parallel",
          "podManagementPolicy must be Parallel: members of a new cluster start together")
    services = {s["metadata"]["name"]: s for s in by_kind["Service"]}
    headless = services.get(spec["serviceName"])
    if check(headless is not None, f"serviceName {spec['serviceName']} names no Service"):
        check(headless["spec"].get("clusterIP") == "None", "the StatefulSet's service is not headless")
        check(headless["spec"].get("publishNotReadyAddresses") is True,
              "the headless service must publish not-ready members (bootstrap)")
    clients = [s for s in services.values() if s["spec"].get("clusterIP") != "None"]
    check(len(clients) == 1, "expected one client (non-headless) Service")

    containers = pod["containers"]
    check(len(containers) == 1, "expected one container")
    c = containers[0]
    check(c.get("name") and c.get("image"), "the container lacks name or image")
    check(c["image"] == "localhost/epoch:0.1.0", f"image is {c['image']}")
    for port in (2379, 2380, 2381):
        check(container_port(c, port) == port, f"the container does not expose {port}")
    for s in services.values():
        check(selects(s["spec"].get("selector"), labels), f"Service {s['metadata']['name']} "
              "selects no member")
        for p in s["spec"]["ports"]:
            check(p.get("port") and container_port(c, p.get("targetPort", p["port"])),
                  f"Service {s['metadata']['name']} port {p} reaches no container port")
    for probe, path in [("readinessProbe", "/readyz"), ("livenessProbe", "/livez")]:
        get = c.get(probe, {}).get("httpGet", {})
        if check(get.get("path") == path, f"{probe} is not GET {path}"):
            check(container_port(c, get.get("port")) == 2381,
                  f"{probe} does not use the metrics port 2381")

    env = env_of(c)
    check(env.get("EPOCHD_CLUSTER_SIZE") == str(replicas),
          f"EPOCHD_CLUSTER_SIZE {env.get('EPOCHD_CLUSTER_SIZE')} != replicas {replicas}")
    check(env.get("EPOCHD_SERVICE") == spec["serviceName"], "EPOCHD_SERVICE != serviceName")
    ns = [e for e in c["env"] if e["name"] == "EPOCHD_NAMESPACE"]
    check(ns and ns[0].get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") ==
          "metadata.namespace", "EPOCHD_NAMESPACE does not come from the pod's namespace")

    mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
    claims = {t["metadata"]["name"]: t for t in spec.get("volumeClaimTemplates", [])}
    data = mounts.get("data")
    if check(data and data["mountPath"] == "/var/lib/epoch" and "data" in claims,
             "no PersistentVolumeClaim template mounted at /var/lib/epoch"):
        claim = claims["data"]["spec"]
        check(claim.get("accessModes") == ["ReadWriteOnce"], "the data claim is not ReadWriteOnce")
        check(claim.get("resources", {}).get("requests", {}).get("storage"),
              "the data claim requests no storage")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    tls = mounts.get("tls")
    if check(tls and tls["mountPath"] == env.get("EPOCHD_TLS_DIR"),
             "no volume mounted at EPOCHD_TLS_DIR"):
        check(volumes.get("tls", {}).get("secret", {}).get("secretName"),
              "the TLS volume is not a Secret")
        check(tls.get("readOnly") is True, "the TLS mount is writable")

    security = pod.get("securityContext", {})
    check(security.get("runAsNonRoot") is True and security.get("runAsUser") == 2379,
          "the pod does not run as the image's non-root user 2379")
    check(security.get("fsGroup") == 2379, "fsGroup 2379 missing: the volume would be root's")
    check(c.get("securityContext", {}).get("allowPrivilegeEscalation") is False,
          "the container allows privilege escalation")
    anti = pod.get("affinity", {}).get("podAntiAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", [])
    check(any(t.get("topologyKey") == "kubernetes.io/hostname" and
              selects(t.get("labelSelector", {}).get("matchLabels"), labels) for t in anti),
          "no required anti-affinity keeping members on different nodes")

    pdb = by_kind["PodDisruptionBudget"][0]["spec"]
    check(selects(pdb["selector"]["matchLabels"], labels), "the PDB selects no member")
    check(pdb.get("minAvailable") == replicas // 2 + 1,
          f"PDB minAvailable {pdb.get('minAvailable')} is not the quorum {replicas // 2 + 1}")
    return sts


def check_entrypoint(source, sts):
    """Every ordinal of the rendered StatefulSet through the entrypoint."""
    spec = sts["spec"]
    env = env_of(spec["template"]["spec"]["containers"][0])
    name, service, replicas = sts["metadata"]["name"], spec["serviceName"], spec["replicas"]
    peers = ",".join(f"{name}-{i}=http://{name}-{i}.{service}.prod.svc.cluster.local:2380"
                     for i in range(replicas))
    tls = tempfile.mkdtemp()
    for f in ("tls.crt", "tls.key", "ca.crt"):
        open(os.path.join(tls, f), "w").close()
    for ordinal in range(replicas):
        run_env = {"PATH": os.environ["PATH"], "EPOCHD_DRY_RUN": "1", "EPOCHD_NAMESPACE": "prod",
                   "EPOCHD_HOSTNAME": f"{name}-{ordinal}", "EPOCHD_TLS_DIR": tls,
                   "EPOCHD_CLUSTER_SIZE": env["EPOCHD_CLUSTER_SIZE"],
                   "EPOCHD_SERVICE": env["EPOCHD_SERVICE"]}
        argv = subprocess.run(["sh", os.path.join(source, "deploy/container/epoch-entrypoint.sh")],
                              env=run_env, check=True, capture_output=True,
                              text=True).stdout.split("\n")
        flag = lambda f: argv[argv.index(f) + 1] if f in argv else None
        check(flag("--name") == f"{name}-{ordinal}", f"ordinal {ordinal}: --name {flag('--name')}")
        check(flag("--initial-cluster") == peers,
              f"ordinal {ordinal}: --initial-cluster {flag('--initial-cluster')}, expected {peers}")
        check(flag("--advertise-client-urls") ==
              f"https://{name}-{ordinal}.{service}.prod.svc.cluster.local:2379",
              f"ordinal {ordinal}: --advertise-client-urls {flag('--advertise-client-urls')}")
    shutil.rmtree(tls)
    return replicas


def main():
    source = sys.argv[1]
    base = os.path.join(source, "deploy/kubernetes")
    sts = check_objects(render(base))
    covered = []
    if sts and not errors:
        covered.append(check_entrypoint(source, sts))
    # A 5-member overlay: what the runbook's larger cluster renders to.
    overlay = tempfile.mkdtemp()
    try:
        with open(os.path.join(overlay, "kustomization.yaml"), "w") as f:
            yaml.safe_dump({"resources": [os.path.relpath(base, overlay)], "patches": [{
                "target": {"kind": "StatefulSet", "name": "epoch"},
                "patch": yaml.safe_dump([
                    {"op": "replace", "path": "/spec/replicas", "value": 5},
                    {"op": "replace", "path": "/spec/template/spec/containers/0/env/0/value",
                     "value": "5"}])}, {
                "target": {"kind": "PodDisruptionBudget", "name": "epoch"},
                "patch": yaml.safe_dump([
                    {"op": "replace", "path": "/spec/minAvailable", "value": 3}])}]}, f)
        if shutil.which("kubectl"):
            five = check_objects(render(overlay))
            if five and not errors:
                covered.append(check_entrypoint(source, five))
    finally:
        shutil.rmtree(overlay)
    for e in errors:
        print(f"FAIL: {e}", file=sys.stderr)
    if errors:
        return 1
    print(f"PASS: kustomize base renders; required fields; entrypoint for {covered} members")
    return 0


if __name__ == "__main__":
    sys.exit(main())
