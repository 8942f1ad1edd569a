#!/usr/bin/env python3
"""The layers of server/ (server/README.md) and the rule between them: a file of a layer includes
headers of its own layer and of the layers below it, never of a layer above. The build enforces
the same rule (a layer's target does not link the layers above, so their headers are not on its
include path); this check names the offending line at once, before a compile. A library inside a
layer's folder listed in STANDALONE includes the header of no layer.

Usage: check_layers.py <repository root>   exits 1 and lists every upward include."""
import os
import re
import sys

# Each layer and the layers it may include (directly; what they may include is allowed too).
BELOW = {
    "state": [],
    "replication": ["state"],
    "rpc": [],
    "peer": ["rpc"],
    "snapshot": ["replication", "peer"],
    "node": ["snapshot", "rpc"],
    "lease": ["node"],
    "watch": ["state"],
    "api": ["lease", "watch", "node"],
    "gateway": [],
    "daemon": ["api", "gateway"],
}

# Libraries inside a layer's folder that depend on no layer at all (common/ only), so that a
# program without the server links them: the snapshot archive format, shared with epochctl.
STANDALONE = ["snapshot/format"]


def allowed(layer, seen=None):
    seen = set() if seen is None else seen
    for below in BELOW[layer]:
        if below not in seen:
            seen.add(below)
            allowed(below, seen)
    return seen | {layer}


def main(root):
    include = re.compile(r'^\s*#\s*include\s+"epoch/([a-z_]+)/')
    server = os.path.join(root, "server")
    found = sorted(d for d in os.listdir(server) if os.path.isdir(os.path.join(server, d)))
    errors = [f"server/{d}: a folder that is not a layer (add it to BELOW)"
              for d in found if d not in BELOW]
    for layer in BELOW:
        ok = allowed(layer)
        for folder, _, files in os.walk(os.path.join(server, layer)):
            rel_folder = os.path.relpath(folder, server)
            standalone = any(rel_folder == s or rel_folder.startswith(s + os.sep)
                             for s in STANDALONE)
            for name in files:
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        m = include.match(line)
                        if m and standalone and m.group(1) in BELOW:
                            rel = os.path.relpath(path, root)
                            errors.append(f"{rel}:{number}: '{rel_folder}' depends on no layer, "
                                          f"yet includes a header of '{m.group(1)}': "
                                          f"{line.strip()}")
                        elif m and m.group(1) in BELOW and m.group(1) not in ok:
                            rel = os.path.relpath(path, root)
                            errors.append(f"{rel}:{number}: layer '{layer}' includes a header of "
                                          f"'{m.group(1)}', a layer above it: {line.strip()}")
    for e in errors:
        print(e)
    print(f"layers: {len(BELOW)} layers checked, {len(errors)} violations")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
