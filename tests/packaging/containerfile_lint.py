#!/usr/bin/env python3
"""containerfile_lint.py <source-dir>: checks deploy/container/Containerfile without building it
(the build and a cluster from it: scripts/container-test.sh). No linter for Containerfiles is
packaged in Debian 12, so the rules the image promises are checked here:
- only known instructions; FROM first (after ARGs), and its ${BASE} declared by an ARG;
- the process runs as a named non-root user, set after the last RUN;
- ENTRYPOINT in exec form, with tini as PID 1 (forwards SIGTERM, reaps) before the entrypoint;
- a HEALTHCHECK in exec form that runs the entrypoint's health check;
- COPY sources are files scripts/container-test.sh puts into the build context;
- apt installs without recommends and leaves no package lists behind.
"""
import json
import os
import re
import sys

KNOWN = {"FROM", "ARG", "RUN", "COPY", "ADD", "USER", "WORKDIR", "VOLUME", "EXPOSE", "ENV",
         "LABEL", "HEALTHCHECK", "ENTRYPOINT", "CMD", "STOPSIGNAL", "SHELL", "ONBUILD"}


def instructions(text):
    """(line number, INSTRUCTION, arguments) with continuation lines joined."""
    out, pending, start = [], "", 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        pending += stripped
        word, _, rest = pending.partition(" ")
        out.append((start, word.upper(), rest.strip()))
        pending = ""
    return out


def exec_form(args, what, errors):
    try:
        value = json.loads(args)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errors.append(f"{what} is not in exec form (a JSON array): {args}")
        return []
    return value


def lint(source):
    path = os.path.join(source, "deploy/container/Containerfile")
    with open(path) as f:
        steps = instructions(f.read())
    with open(os.path.join(source, "scripts/container-test.sh")) as f:
        context_script = f.read()
    errors = []
    for line, word, _ in steps:
        if word not in KNOWN:
            errors.append(f"line {line}: unknown instruction {word}")
    words = [w for _, w, _ in steps]
    first = next((w for w in words if w != "ARG"), None)
    if first != "FROM":
        errors.append(f"the first instruction after ARGs is {first}, not FROM")
    args_declared = {a.split("=")[0] for _, w, a in steps if w == "ARG"}
    for line, word, args in steps:
        if word == "FROM":
            for var in re.findall(r"\$\{?(\w+)", args):
                if var not in args_declared:
                    errors.append(f"line {line}: FROM uses ${var}, declared by no ARG")

    users = [(i, a) for i, (_, w, a) in enumerate(steps) if w == "USER"]
    last_run = max((i for i, (_, w, _) in enumerate(steps) if w == "RUN"), default=-1)
    if not users:
        errors.append("no USER: the image would run as root")
    else:
        index, user = users[-1]
        if user.split(":")[0] in ("root", "0"):
            errors.append(f"USER {user} is root")
        if index < last_run:
            errors.append("USER is set before the last RUN")

    entry = [a for _, w, a in steps if w == "ENTRYPOINT"]
    if len(entry) != 1:
        errors.append(f"expected one ENTRYPOINT, found {len(entry)}")
    else:
        argv = exec_form(entry[0], "ENTRYPOINT", errors)
        if argv[:2] != ["/usr/bin/tini", "--"] or len(argv) < 3:
            errors.append(f"ENTRYPOINT does not start tini as PID 1: {argv}")
        elif argv[2] != "/usr/local/bin/epoch-entrypoint":
            errors.append(f"ENTRYPOINT runs {argv[2]}, not the entrypoint")

    health = [a for _, w, a in steps if w == "HEALTHCHECK"]
    if len(health) != 1:
        errors.append(f"expected one HEALTHCHECK, found {len(health)}")
    else:
        cmd = health[0].partition("CMD")[2].strip()
        argv = exec_form(cmd, "HEALTHCHECK CMD", errors)
        if argv != ["/usr/local/bin/epoch-entrypoint", "healthcheck"]:
            errors.append(f"HEALTHCHECK runs {argv}")

    for line, word, args in steps:
        if word == "ADD":
            errors.append(f"line {line}: ADD (use COPY)")
        if word == "COPY":
            sources = args.split()[:-1]
            for src in sources:
                if src.startswith("--"):
                    continue
                if src not in context_script:
                    errors.append(f"line {line}: COPY {src}: scripts/container-test.sh does not "
                                  "put it into the build context")
        if word == "RUN" and "apt-get install" in args:
            if "--no-install-recommends" not in args:
                errors.append(f"line {line}: apt-get install without --no-install-recommends")
            if "rm -rf /var/lib/apt/lists/*" not in args:
                errors.append(f"line {line}: the apt package lists stay in the image")
    return errors


def main():
    errors = lint(sys.argv[1])
    for e in errors:
        print(f"FAIL: Containerfile: {e}", file=sys.stderr)
    if not errors:
        print("PASS: Containerfile: base, non-root USER, tini, HEALTHCHECK, COPY sources, apt")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
