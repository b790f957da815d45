#!/usr/bin/env python3
"""The daemon's layers, checked: every #include of daemon/ and cli/ goes to its own folder
or to one the data's path puts below it, and no set of files includes itself in a circle.

    collect -> decode -> store <- analyze <- api <- serve        (each arrow: "is used by")

  lib      log, hash tables, vectors, clocks, JSON getters: usable from every layer
  collect  loads, sizes and attaches the BPF programs, drains rings and wait tables
  store    the aggregator and interned stacks: data structures only, no JSON
  decode   ring records and wait entries into store events; symbols, unwinding, dumps
  analyze  queries over the store: rows, threads, spin findings, diagnoses
  api      the request protocol: the engine that wires the stages, one handler per
           command, access control, JSON/Prometheus/pprof/folded rendering
  serve    the epoll loop, the socket server, metrics listener, sd_notify, config
  cli      the client; its embedded scan runs the api layer in-process

bpf/*.h (the kernel side's shared record layouts) may be included anywhere; a BPF
skeleton only in collect. Usage: tests/layers.py [ROOT]; exit 1 with each violation.
"""
import os
import re
import sys

ALLOWED = {
    "lib": {"lib"},
    "collect": {"lib", "collect"},
    "store": {"lib", "store"},
    "decode": {"lib", "collect", "store", "decode"},
    "analyze": {"lib", "store", "decode", "analyze"},
    "api": {"lib", "collect", "store", "decode", "analyze", "api"},
    "serve": {"lib", "collect", "api", "serve"},
    "main": {"lib", "collect", "api", "serve"},     # daemon/main.c
    "cli": {"lib", "api", "analyze", "serve", "cli"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(rel):
    """The layer of a file under daemon/ or cli/, by its folder."""
    parts = rel.split("/")
    if parts[0] == "cli":
        return "cli"
    if parts[0] == "daemon":
        return "main" if len(parts) == 2 else parts[1]
    return None


def sources(root):
    for top in ("daemon", "cli"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(d, f), root)


def resolve(root, rel, inc):
    """The file an include names: beside the includer, under daemon/ (-Idaemon), in bpf/
    (-Ibpf) or generated in the build (skeletons, protobuf); None for the last."""
    for base in (os.path.dirname(rel), "daemon", "bpf", "cli"):
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def check(root):
    errors, graph = [], {}
    for rel in sources(root):
        layer = layer_of(rel)
        if layer not in ALLOWED:
            errors.append(f"{rel}: in no layer (daemon/{{{','.join(sorted(ALLOWED))}}}/)")
            continue
        with open(os.path.join(root, rel)) as f:
            text = f.read()
        graph[rel] = []
        for inc in INCLUDE.findall(text):
            if inc.endswith(".skel.h"):
                if layer != "collect":
                    errors.append(f"{rel}: includes the BPF skeleton {inc}: only collect/ loads programs")
                continue
            target = resolve(root, rel, inc)
            if target is None or target.startswith("bpf/"):
                continue    # generated, or the kernel side's shared layouts
            graph[rel].append(target)
            to = layer_of(target)
            if to not in ALLOWED[layer]:
                errors.append(f"{rel}: includes {target}: {layer} may not depend on {to} "
                              f"(it may on {', '.join(sorted(ALLOWED[layer] - {layer})) or 'nothing'})")
    errors += cycles(graph)
    return errors


def cycles(graph):
    """Every include cycle, once, as the files on it."""
    out, state, stack = [], {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in graph.get(n, []):
            if state.get(m) == 1:
                out.append("include cycle: " + " -> ".join(stack[stack.index(m):] + [m]))
            elif m in graph and not state.get(m):
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if not state.get(n):
            visit(n)
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    errors = check(root)
    for e in errors:
        print(f"layers: {e}", file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"layers: {sum(1 for _ in sources(root))} files, every include goes down the data's path, no cycle")


if __name__ == "__main__":
    main()
